"""The GPU check's models and programs, in plain torch (imported on the device machine, where only torch is).

The bundle lowers each program here with `et_tensorrt.lower` and ships its `.pte`, the model's weights, the
inputs and the eager outputs computed here on the CPU in fp32. On the device machine the same classes with
the shipped weights give the eager-CUDA timings, with no ExecuTorch or ONNX there.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn


class Mlp(nn.Module):
    """Three linear layers: one engine, weight-heavy enough that its engine and embedded program are real."""

    def __init__(self, width: int = 256, hidden: int = 384):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(width, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, width)
        )

    def forward(self, x):
        return self.layers(x)


class ConvNet(nn.Module):
    """Convolutions then a classifier head: compute-bound where the MLP is launch-bound."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU()
        )
        self.head = nn.Linear(64, 10)

    def forward(self, x):
        return self.head(self.features(x).mean(dim=(2, 3)))


class HostOpBetween(nn.Module):
    """linear -> tanh -> linear, with tanh kept on the host: two delegates and one ExecuTorch CPU kernel."""

    def __init__(self, width: int = 64):
        super().__init__()
        self.first = nn.Linear(width, width)
        self.second = nn.Linear(width, width)

    def forward(self, x):
        return self.second(torch.tanh(self.first(x)))


class TinyDecoder(nn.Module):
    """One attention layer with a static KV cache written like HF's ``StaticLayer`` (``index_copy_`` at
    ``cache_position`` along the sequence axis): the delegate owns the cache, TensorRT's KV-cache layer
    updates it in place on the device (docs/stateful-decode.md)."""

    def __init__(self, vocab: int = 64, dim: int = 32, heads: int = 2, context: int = 16):
        super().__init__()
        self.heads, self.head_dim, self.context = heads, dim // heads, context
        self.embed = nn.Embedding(vocab, dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, vocab)
        self.register_buffer("k_cache", torch.zeros(1, heads, context, dim // heads), persistent=False)
        self.register_buffer("v_cache", torch.zeros(1, heads, context, dim // heads), persistent=False)

    def forward(self, tokens, cache_position):
        x = self.embed(tokens)  # (1, S, dim)
        q, k, v = (t.reshape(1, -1, self.heads, self.head_dim).transpose(1, 2) for t in self.qkv(x).chunk(3, -1))
        self.k_cache.index_copy_(2, cache_position, k)
        self.v_cache.index_copy_(2, cache_position, v)
        visible = torch.arange(self.context, device=tokens.device)[None, :] <= cache_position[:, None]
        attention = nn.functional.scaled_dot_product_attention(q, self.k_cache, self.v_cache, attn_mask=visible)
        return self.out(attention.transpose(1, 2).reshape(1, -1, self.heads * self.head_dim))


MODELS = {"mlp": Mlp, "convnet": ConvNet, "host_op_between": HostOpBetween, "tiny_decoder": TinyDecoder}

INPUT_SHAPES = {"mlp": [(32, 256)], "convnet": [(8, 3, 64, 64)], "host_op_between": [(16, 64)]}
DECODE_TOKENS = [3, 17, 5, 42, 8, 11, 29, 2, 60, 7, 33, 21]  # tiny_decoder: one token per call, from position 0


# Issue 34: a decode step of a Llama-3.2-1B-shaped decoder (ExecuTorch's llama Transformer, random weights)
# against the memory-bandwidth roofline. At batch 1 a step reads every layer's weights and the head once (the
# embedding lookup reads one row): 2.47 GB in bf16. The device bundle lowers "llama-3.2-1b"; --local lowers "tiny"
# (the same code path, a CPU-sized model; the row itself needs a GPU).
ROOFLINE_SHAPES = {
    "llama-3.2-1b": dict(dim=2048, n_layers=16, n_heads=32, n_kv_heads=8, hidden_dim=8192, vocab_size=128256),
    "tiny": dict(dim=64, n_layers=2, n_heads=4, n_kv_heads=2, hidden_dim=128, vocab_size=128),
}
ROOFLINE_CONTEXT = 128  # cache length: small, so the weights are what a step reads
ROOFLINE_STEPS = 64  # decode calls timed
ROOFLINE_CHECKED = [3, 5]  # the first tokens, whose logits the bundle computed eagerly
# Peak memory bandwidth (bytes/s), by a substring of torch.cuda.get_device_name, first match wins.
BANDWIDTH = (("H200", 4.8e12), ("H100 PCIe", 2.0e12), ("H100 NVL", 3.9e12), ("H100", 3.35e12))


def bytes_per_token(shape: dict, weight_bits: int = 16, group: int = 32) -> int:
    """What a decode step reads at batch 1: each layer's linear weights (``weight_bits`` wide, with a bf16 scale per
    ``group`` when quantized) and norms, and the bf16 head."""
    dim, hidden, layers = shape["dim"], shape["hidden_dim"], shape["n_layers"]
    kv = dim // shape["n_heads"] * shape["n_kv_heads"]
    linear = 2 * dim * dim + 2 * dim * kv + 3 * dim * hidden
    per_layer = linear * weight_bits // 8 + (linear // group * 2 if weight_bits < 16 else 0) + 2 * dim * 2
    return layers * per_layer + shape["vocab_size"] * dim * 2


def bandwidth(gpu_name: str) -> float | None:
    return next((b for key, b in BANDWIDTH if key in gpu_name), None)


@dataclass(frozen=True)
class ProgramSpec:
    """One `.pte` of the check: which model, how it is lowered, and what it is there to show."""

    name: str
    model: str
    precision: str = "fp32"
    zero_copy_outputs: bool = True  # outputs left unplanned: the Runner writes them into caller memory
    options: dict = field(default_factory=dict)  # more `et_tensorrt.lower` options
    shows: str = ""
    decode: bool = False  # a stateful decoder: DECODE_TOKENS run one per call through one Runner
    # quantized before lowering (bundle.py applies it with torchao; eager outputs are the quantized model's)
    quantize: str = ""


PROGRAMS = (
    ProgramSpec("mlp_fp32", "mlp", shows="engine deserializes; CUDA inputs shared; caller CUDA outputs in place"),
    ProgramSpec(
        "mlp_fp32_planned",
        "mlp",
        zero_copy_outputs=False,
        shows="outputs ExecuTorch planned in host memory: copied device -> host",
    ),
    ProgramSpec("mlp_fp16", "mlp", precision="fp16", shows="fp16 engine within fp16 tolerance"),
    ProgramSpec("convnet_fp32", "convnet", shows="convolutions; latency against eager CUDA"),
    ProgramSpec(
        "host_op_between",
        "host_op_between",
        zero_copy_outputs=False,
        options={"torch_executed_ops": ["aten.tanh.default"]},
        shows="two delegates around an ExecuTorch CPU kernel (loaded without executorch.exir)",
    ),
    ProgramSpec(
        "mlp_int4_weight_only",
        "mlp",
        precision="fp16",
        quantize="int4-weight-only",
        shows="int4 weight-only GEMM (issue 28): torchao's IntxWeightOnlyConfig(int4, PerGroup(32)), one engine "
        "with INT4 block-dequantized weights and fp16 activations",
    ),
    ProgramSpec(
        "decoder_kv_cache",
        "tiny_decoder",
        zero_copy_outputs=False,
        decode=True,
        shows="token-by-token decode, the KV cache owned by the delegate and updated in place on the GPU",
    ),
)

# weights="refit" programs (issue 17) are not in the bundle: the bundle is lowered on the CPU machine, and
# TensorRT-RTX 1.7.1 builds refittable (weight-stripped) engines only with a GPU. checks.refit runs them when a
# bundle carries them (e.g. "mlp_fp32_refit", options={"weights": "refit"}, lowered on a GPU machine).

SEED = 0


def build_model(name: str, state_dict: dict | None = None) -> nn.Module:
    """The model, seeded; with ``state_dict`` its shipped weights instead."""
    torch.manual_seed(SEED)
    model = MODELS[name]().eval()
    if state_dict is not None:
        model.load_state_dict(state_dict)
    return model


def decode_inputs(position: int) -> list[torch.Tensor]:
    """tiny_decoder's inputs for the call at ``position``: its token and cache_position."""
    return [torch.tensor([[DECODE_TOKENS[position]]]), torch.tensor([position])]


def example_inputs(name: str) -> list[torch.Tensor]:
    if name == "tiny_decoder":
        return decode_inputs(0)
    generator = torch.Generator().manual_seed(SEED + 1)
    return [torch.randn(shape, generator=generator) for shape in INPUT_SHAPES[name]]
