"""``precision="fp16"``/``"bf16"`` on fp32 programs (backend/precision.py): the partition itself is cast, so every op
sees one dtype, the weights are cast once at build (the engine carries half of them), float32 stays where range or
accumulation needs it, and the delegate's inputs and outputs keep the program's dtypes."""

from __future__ import annotations

import pytest
import torch

import et_tensorrt
from et_tensorrt import Runner
from et_tensorrt.backend.precision import FP32_OPS, LOW_OPS, in_precision
from et_tensorrt.format.blob import read_blob
from et_tensorrt.format.dtypes import scalar_type_code
from et_tensorrt.inspection import delegate_blobs
from et_tensorrt.parity import compare, for_precision
from et_tensorrt.testing import quantized_models

HALF = {"fp16": torch.float16, "bf16": torch.bfloat16}


class NormAttention(torch.nn.Module):
    """An RMSNorm (its square spelled ``x * x``), a softmax attention over rotary-like tables computed from integer
    positions, and a cache written at those positions: what a decoder layer mixes."""

    def __init__(self, width: int = 16, length: int = 8):
        super().__init__()
        self.norm = torch.nn.Parameter(torch.rand(width) + 0.5)
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.out = torch.nn.Linear(width, width)
        self.register_buffer("freqs", torch.rand(width))
        self.register_buffer("cache", torch.zeros(length, width))
        self.register_buffer("head", torch.randn(width, width) / 4)  # a weight held as a buffer

    def forward(self, x, positions):
        h = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * self.norm
        q, k, v = self.qkv(h).chunk(3, dim=-1)
        angles = positions.float()[:, None] * self.freqs
        q, k = q * torch.cos(angles), k * torch.cos(angles)
        self.cache.index_copy_(0, positions, k)
        weights = torch.softmax(q @ self.cache.T / 4.0, dim=-1)
        return (x + self.out(weights @ torch.cat([v, self.cache[len(positions) :]]))) @ self.head


def _program():
    torch.manual_seed(0)
    model = NormAttention().eval()
    args = (torch.randn(3, 16), torch.arange(3))
    return model, args, torch.export.export(model, args).run_decompositions()


def _float_dtypes(node) -> set:
    return {
        a.meta["val"].dtype
        for a in node.all_input_nodes
        if isinstance(a.meta.get("val"), torch.Tensor) and a.meta["val"].is_floating_point() and a.meta["val"].dim()
    }


@pytest.mark.parametrize("precision", list(HALF))
def test_every_op_sees_one_dtype_and_accumulations_stay_fp32(precision):
    model, args, ep = _program()
    cast = in_precision(ep, precision)
    low = HALF[precision]
    calls = [n for n in cast.graph.nodes if isinstance(n.target, torch._ops.OpOverload)]
    assert all(len(_float_dtypes(n)) <= 1 for n in calls), [(n.name, _float_dtypes(n)) for n in calls]
    matmuls = [n for n in calls if n.target.overloadpacket in LOW_OPS]
    assert matmuls and all(n.meta["val"].dtype == low for n in matmuls)
    wide = [n for n in calls if n.target.overloadpacket in FP32_OPS or n.target == torch.ops.aten.mul.Tensor]
    assert any(n.target.overloadpacket == torch.ops.aten._softmax for n in wide)
    assert all(n.meta["val"].dtype == torch.float32 for n in wide if n.target.overloadpacket in FP32_OPS)
    # weights and the mutated buffer in the engine's precision; the unmutated table and the I/O as they were
    state = cast.state_dict
    assert state["qkv.weight"].dtype == state["cache"].dtype == state["head"].dtype == low
    assert state["freqs"].dtype == torch.float32
    assert state["norm"].dtype == torch.float32  # only a float32 product reads it: kept, not cast per call
    weights = {s.arg.name for s in cast.graph_signature.input_specs if s.kind.name in ("PARAMETER", "BUFFER")}
    assert not [n for n in calls if n.target == torch.ops.aten._to_copy.default and n.args[0].name in weights]
    x = [n for n in cast.graph.nodes if n.op == "placeholder" and n.name == "x"][0]
    assert x.meta["val"].dtype == torch.float32
    with torch.no_grad():
        expected = model(*args)
        got = cast.module()(*args)
    assert got.dtype == torch.float32
    assert compare([expected], [got], for_precision(precision)).passed


def test_a_program_without_float32_is_left_as_it_is():
    ep = torch.export.export(torch.nn.Linear(4, 4).to(torch.float16), (torch.randn(2, 4, dtype=torch.float16),))
    assert in_precision(ep, "fp16") is ep and in_precision(ep, "fp32") is ep


@pytest.fixture(scope="module")
def mlp_lowerings():
    torch.manual_seed(0)
    model = quantized_models.Mlp(width=512, layers=4).eval()
    x = torch.randn(4, 512)
    lowered = {p: et_tensorrt.lower(model, (x,), min_block_size=1, precision=p) for p in ("fp32", *HALF)}
    return model, x, lowered


@pytest.mark.parametrize("precision", list(HALF))
def test_half_engine_carries_half_the_weights_and_keeps_fp32_io(mlp_lowerings, precision):
    model, x, lowered = mlp_lowerings
    (fp32,), (half,) = ([read_blob(b) for b in delegate_blobs(lowered[p])] for p in ("fp32", precision))
    assert len(half.engine) < 0.6 * len(fp32.engine)  # 4 MiB of fp32 weights: the engine is mostly weights
    assert all(w.dtype == scalar_type_code(HALF[precision]) for w in half.weights)  # cast once, at build
    assert [e.dtype for e in half.io] == [scalar_type_code(torch.float32)] * 2
    got = Runner(lowered[precision]).run([x])[0]
    with torch.no_grad():
        assert compare([model(x)], [got], for_precision(precision)).passed
