"""``weights`` modes (issue 17): what each blob carries, the REFIT_MAP derivation and its byte-for-byte
verification (including a map that must fail loudly), refit with a fake TensorRT refitter, the runtime on this
GPU-less machine (refit: the embedded program runs; engine-only: init fails naming why) and the reader's
REFIT_MAP checks.

TensorRT-RTX 1.7.1 cannot build a refittable engine without a GPU (measured: STRIP_PLAN, REFIT,
REFIT_IDENTICAL all fail in Myelin's CUDA JIT), so ``lower(weights="refit")`` here fails with that reason, and
the refit blobs below are the ``both`` blob plus the REFIT_MAP the backend derives (the stripped engine is
what only a GPU machine can make; scripts/gpu_check covers it there)."""

from __future__ import annotations

import struct

import numpy as np
import pytest
import torch

from et_tensorrt import lower
from et_tensorrt.backend.precision import in_precision
from et_tensorrt.backend.refit_derivation import (
    derive_refit_map,
    onnx_initializers,
    verify_refit_map,
)
from et_tensorrt.builder.onnx_export import export_onnx
from et_tensorrt.compile_specs import BuildOptions
from et_tensorrt.embedded_program.writer import program_weights
from et_tensorrt.errors import BlobFormatError, EngineBuildError, OptionError
from et_tensorrt.format import refit_map as rm
from et_tensorrt.format.blob import SECTION_REFIT_MAP, read_blob
from et_tensorrt.inspection import delegate_blobs, inspect_bytes
from et_tensorrt.runtime.refit import RefitError, refit_engine


class ConvBnMlp(torch.nn.Module):
    """A conv + batch norm (ONNX export folds it into the conv), a linear (transposed by export), a bias-free
    linear and a buffer."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8 * 4 * 4, 32)
        self.head = torch.nn.Linear(32, 6, bias=False)
        self.register_buffer("scale", torch.linspace(0.5, 1.5, 6))
        with torch.no_grad():  # statistics that are not the identity, so the folded weights differ
            self.bn.running_mean.uniform_(-1, 1)
            self.bn.running_var.uniform_(0.5, 2)
            self.bn.weight.uniform_(0.5, 2)
            self.bn.bias.uniform_(-1, 1)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        return self.head(torch.relu(self.fc(y.flatten(1)))) * self.scale


X = torch.randn(2, 3, 4, 4, generator=torch.Generator().manual_seed(0))


def blobs(data: bytes):
    return [d.blob for d in inspect_bytes(data).method("forward").delegates if d.ours]


@pytest.fixture(scope="module")
def model():
    with torch.random.fork_rng():  # the same weights whatever ran before; the global RNG left as it was
        torch.manual_seed(0)
        return ConvBnMlp().eval()


@pytest.fixture(scope="module")
def lowered(model):
    ep = torch.export.export(model, (X,))
    return {mode: lower(ep, weights=mode) for mode in ("both", "engine-only")}


@pytest.fixture(scope="module")
def refit_blob(lowered, model):
    """The ``both`` blob with the REFIT_MAP preprocess derives for it (its engine is not stripped: a stripped one
    cannot be built here), written by the blob writer and read back by the C++ reader."""
    (both,) = delegate_blobs(lowered["both"])
    _, export, weights = _partition(model)
    plan = derive_refit_map(export, weights, _partition(model)[0])
    return _with_refit_map(both, plan.payload)


def test_option_is_checked_and_travels_as_a_compile_spec():
    assert BuildOptions().weights == "both"
    assert BuildOptions(weights="ENGINE_ONLY").weights == "engine-only"
    assert BuildOptions.from_specs({"et_tensorrt.weights": b"refit"}).weights == "refit"
    assert BuildOptions(weights="refit").to_specs()["et_tensorrt.weights"] == "refit"
    with pytest.raises(OptionError, match="weights 'twice' is not one of both, refit, engine-only"):
        BuildOptions(weights="twice")


def test_each_mode_carries_what_it_says(lowered, refit_blob):
    (both,), (engine_only,) = (blobs(lowered[m]) for m in ("both", "engine-only"))
    refit = read_blob(refit_blob)
    assert both.engine and both.graph and both.weights and both.refit_map is None
    assert refit.engine and refit.graph and refit.weights and refit.refit_map is not None
    assert engine_only.engine and engine_only.graph is None and not engine_only.weights
    assert [b.metadata["weights"] for b in (both, engine_only)] == ["both", "engine-only"]
    assert len(lowered["engine-only"]) < len(lowered["both"])


def test_refit_lowering_without_a_gpu_names_why_before_any_work(model):
    with pytest.raises(OptionError, match="cannot build a weight-stripped .* without a GPU.*weights 'both'"):
        lower(torch.export.export(model, (X,)), weights="refit")


def test_refit_map_rebuilds_every_weight_from_weights(refit_blob):
    refit = read_blob(refit_blob)
    # Every float initializer (a weight) has a recipe: each weight stored once. Only the exporter's own small
    # constants (the flatten's int64 shape) are stored raw.
    floats = [e for e in refit.refit_entries if e.dtype in (5, 6, 15)]
    assert floats and not any(e.raw for e in floats)
    assert sum(s.nbytes for e in refit.refit_entries for s in e.steps if s.op == rm.RAW) <= 64
    ops = {rm.STEP_NAMES[s.op] for e in refit.refit_entries for s in e.steps}
    assert {"source", "permute", "bn_scale", "bn_shift"} <= ops, ops


def _partition(model, precision="fp32"):
    from executorch.exir import to_edge

    from et_tensorrt.builder.edge_to_aten import edge_to_aten

    ep = edge_to_aten(to_edge(torch.export.export(model, (X,))).exported_program())
    # the export in that precision, derived from the program's float32 weights (CAST steps)
    return ep, export_onnx(in_precision(ep, precision)), program_weights(ep)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_derivation_verifies_byte_for_byte(model, precision):
    ep, export, weights = _partition(model, precision)
    plan = derive_refit_map(export, weights, ep)
    assert plan.raw_bytes <= 64
    payload = plan.payload
    entries = {e.name: e for e in plan.entries}
    tensors = [w.tensor for w in weights]
    # Recipes as encoded (RAW offsets assigned), rebuilt and compared with the ONNX model's bytes.
    verify_refit_map(export, plan.entries, tensors, payload)
    if precision == "fp16":
        assert all(
            any(s.op == rm.CAST for s in e.steps)
            for e in entries.values()
            if rm.rebuild(e, tensors, payload).dtype == torch.float16
        )


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_derivation_reads_the_weights_a_slab_at_a_time(model, precision, monkeypatch):
    """Fingerprints and comparisons over slabs (of a few elements here; millions for a large model's weights) find
    the same recipes as whole tensors would, without copying a weight whole."""
    from et_tensorrt.backend import refit_derivation

    ep, export, weights = _partition(model, precision)
    whole = derive_refit_map(export, weights, ep)
    monkeypatch.setattr(refit_derivation, "_SLAB", 5)
    sliced = derive_refit_map(export, weights, ep)
    assert [e.steps for e in sliced.entries] == [e.steps for e in whole.entries]
    verify_refit_map(export, sliced.entries, [w.tensor for w in weights], sliced.payload)


def test_an_initializer_that_is_the_programs_tensor_is_its_source_unread():
    """The export kept the program's own tensor (a large model's linears): SOURCE, recognized by its memory; a copy
    of the same bytes is found by reading them; the same bytes in another dtype are not."""
    from et_tensorrt.backend.refit_derivation import _Deriver
    from et_tensorrt.format.blob import Weight

    w = torch.randn(4, 6, generator=torch.Generator().manual_seed(3))
    other = torch.randn(4, 6, generator=torch.Generator().manual_seed(4))
    deriver = _Deriver([Weight("other", "parameter", other), Weight("fc.weight", "parameter", w)], None)
    assert deriver.derive("fc.weight", w) == (rm.Step(rm.SOURCE, weight=1),)
    assert deriver.derive("flat", w.reshape(24)) == (rm.Step(rm.SOURCE, weight=1), rm.Step(rm.RESHAPE, dims=(24,)))
    assert deriver.derive("copy", w.clone()) == (rm.Step(rm.SOURCE, weight=1),)
    assert deriver.derive("t", w.t().contiguous()) == (rm.Step(rm.SOURCE, weight=1), rm.Step(rm.PERMUTE, dims=(1, 0)))
    assert deriver.derive("half", w.half())[1] == rm.Step(rm.CAST, dtype=5)


def test_a_wrong_recipe_fails_loudly(model):
    ep, export, weights = _partition(model)
    plan = derive_refit_map(export, weights, ep)
    tensors = [w.tensor for w in weights]
    names = [w.name for w in weights]
    # Point one recipe at another weight of the same size (an off-by-one in a map must never refit silently).
    victim = next(e for e in plan.entries if e.name == "conv.bias")
    assert rm.describe(victim, names) == "bn_shift(conv.bias)"
    other = names.index("bn.bias")
    wrong = rm.Entry(victim.name, victim.dtype, victim.sizes, (rm.Step(rm.SOURCE, weight=other), *victim.steps[1:]))
    entries = [wrong if e is victim else e for e in plan.entries]
    with pytest.raises(EngineBuildError, match=f"initializer '{victim.name}' rebuilt as .* differs from the ONNX"):
        verify_refit_map(export, entries, tensors, plan.payload)
    with pytest.raises(EngineBuildError, match="has no entry"):
        verify_refit_map(export, plan.entries[1:], tensors, plan.payload)
    # A source one ULP off in one element (the folded conv weight's first): exact, not within a tolerance, because
    # the engine is built with REFIT_IDENTICAL.
    w = names.index("conv.weight")
    nudged = tensors[w].detach().clone()
    nudged.view(-1)[0] = torch.nextafter(nudged.view(-1)[0], torch.tensor(float("inf")))
    with pytest.raises(EngineBuildError, match="initializer 'conv.weight' rebuilt as bn_scale"):
        verify_refit_map(export, plan.entries, [*tensors[:w], nudged, *tensors[w + 1 :]], plan.payload)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_batch_norm_steps_are_correctly_rounded(dtype):
    """BN_SCALE / BN_SHIFT give every op's correctly rounded result (each op in float64, rounded to ``dtype``):
    what IEEE arithmetic gives on any CPU, hence what the exporter's numpy fold gives, whatever the kernels."""
    g = torch.Generator().manual_seed(0)
    n = 4096
    w, bias, gamma, mean, beta = (torch.randn(n, generator=g) for _ in range(5))
    var = torch.rand(n, generator=g) * 4
    eps = float(torch.tensor(1e-5, dtype=torch.float32))
    code = {torch.float32: 6, torch.float16: 5, torch.bfloat16: 15}[dtype]
    weights = [w.reshape(n, 1), gamma, var, mean, beta, bias]
    cast = rm.Step(rm.CAST, dtype=code)
    scale = rm.Entry(
        "w", code, (n, 1), (rm.Step(rm.SOURCE, weight=0), cast, rm.Step(rm.BN_SCALE, params=(1, 2), eps=eps))
    )
    shift = (rm.Step(rm.SOURCE, weight=5), cast, rm.Step(rm.BN_SHIFT, params=(1, 2, 3, 4), eps=eps))

    def r(x):  # a float64 result rounded to dtype (double rounding through float32 is innocuous here)
        return torch.from_numpy(x).to(dtype).double().numpy()

    W, B, G, V, M, BETA = (r(t.double().numpy()) for t in (w, bias, gamma, var, mean, beta))
    factor = r(G / r(np.sqrt(r(V + r(np.array(eps))))))
    want_scale, want_shift = r(W * factor), r(r(r(B - M) * factor) + BETA)
    got_scale = rm.rebuild(scale, weights, b"").reshape(-1)
    got_shift = rm.rebuild(rm.Entry("b", code, (n,), shift), weights, b"")
    assert torch.equal(got_scale, torch.from_numpy(want_scale).to(dtype))
    assert torch.equal(got_shift, torch.from_numpy(want_shift).to(dtype))


def test_an_initializer_without_a_recipe_is_stored_raw(model):
    _, export, weights = _partition(model)
    plan = derive_refit_map(export, weights[:1], None)  # most sources withheld
    assert plan.raw_bytes > 1000 and any(e.raw for e in plan.entries)
    verify_refit_map(export, plan.entries, [w.tensor for w in weights[:1]], plan.payload)


class FakeRefitter:
    """trt.Refitter's surface: the names the engine wants, what it was given, the refit."""

    def __init__(self, names):
        self.names, self.given = list(names), {}

    def get_all_weights(self):
        return self.names

    def set_named_weights(self, name, weights):
        # TensorRT reads host weights until refit_cuda_engine returns; the fake reads them right away.
        import ctypes

        size = {0: 4, 1: 2, 2: 2, 3: 4, 4: 8, 5: 1, 6: 1, 7: 1}[weights.dtype]
        self.given[name] = (weights.count, ctypes.string_at(weights.ptr, weights.count * size))
        return True

    def get_missing_weights(self):
        return [n for n in self.names if n not in self.given]

    def refit_cuda_engine(self):
        self.refitted = True
        return True


class FakeTrt:
    class DataType:
        FLOAT, HALF, BF16, INT32, INT64, INT8, UINT8, BOOL = range(8)

    class Weights:
        def __init__(self, dtype, ptr, count):
            self.dtype, self.ptr, self.count = dtype, ptr, count


def test_refit_hands_tensorrt_the_onnx_bytes(refit_blob, model):
    """The init-time path with a fake refitter: every weight the engine asks for gets exactly the bytes the
    engine was built with (the ONNX initializers), read at the pointer TensorRT is given."""
    refit = read_blob(refit_blob)
    _, export, _ = _partition(model)
    expected = dict(onnx_initializers(export))
    refitter = FakeRefitter(expected)
    assert refit_engine(FakeTrt, None, refit, refitter=refitter) == len(expected)
    assert refitter.refitted
    for name, (count, got) in refitter.given.items():
        want = expected[name].contiguous()
        assert count == want.numel() and got == want.reshape(-1).view(torch.uint8).numpy().tobytes(), name


def test_refit_refuses_a_weight_the_map_lacks(refit_blob):
    refit = read_blob(refit_blob)
    with pytest.raises(RefitError, match="does not describe: \\['not_in_the_map'\\]"):
        refit_engine(FakeTrt, None, refit, refitter=FakeRefitter(["not_in_the_map"]))


def test_refit_blob_runs_its_program_without_a_gpu(refit_blob, model):
    """No GPU: the executor the delegate would build is the PyTorch one, over the embedded program."""
    from et_tensorrt.runtime import executors

    executor, choice = executors.create_executor(refit_blob)
    assert choice["executor"] == "pytorch" and "no CUDA device" in choice["reason"]
    (out,) = executor.run([X], [None])
    torch.testing.assert_close(out, model(X), rtol=1e-4, atol=1e-4)


def test_engine_only_fails_init_naming_why(lowered):
    from et_tensorrt.errors import RunnerError
    from et_tensorrt.runtime.runner import Runner

    with pytest.raises(RunnerError) as info:
        Runner(lowered["engine-only"]).run([X])
    text = str(info.value)
    assert "no CUDA device is available" in text and "engine-only" in text, text


def _with_refit_map(blob_bytes: bytes, payload: bytes) -> bytes:
    """The blob with its REFIT_MAP payload replaced (sections rewritten by the fixture writer)."""
    from et_tensorrt.format.blob import (
        SECTION_ENGINE,
        SECTION_GRAPH,
        SECTION_IO_TABLE,
        SECTION_METADATA,
        SECTION_WEIGHTS,
        write_sections,
    )

    b = read_blob(blob_bytes)
    sec = {SECTION_ENGINE: b.engine, SECTION_GRAPH: b.graph, SECTION_REFIT_MAP: payload}
    raw = bytes(blob_bytes)
    # Re-read the section table to copy IO_TABLE, WEIGHTS and METADATA payloads verbatim.
    count = struct.unpack_from("<I", raw, 12)[0]
    for i in range(count):
        kind, _, off, size = struct.unpack_from("<IIQQ", raw, 32 + 24 * i)
        if kind in (SECTION_IO_TABLE, SECTION_WEIGHTS, SECTION_METADATA):
            sec[kind] = raw[off : off + size]
    order = (SECTION_IO_TABLE, SECTION_ENGINE, SECTION_GRAPH, SECTION_WEIGHTS, SECTION_REFIT_MAP, SECTION_METADATA)
    return write_sections([(k, bytes(sec[k])) for k in order], b.exec_device_type, b.exec_device_index)


def _entry(name: str, steps: bytes, nsteps: int, sizes=(2,), dtype=6) -> bytes:
    n = name.encode()
    return (
        struct.pack("<HBBHH", len(n), dtype, len(sizes), nsteps, 0) + n + struct.pack(f"<{len(sizes)}q", *sizes) + steps
    )


@pytest.mark.parametrize(
    "payload, message",
    [
        (struct.pack("<II", 1, 0) + _entry("w", struct.pack("<BBH", 9, 0, 0), 1), "unknown operation 9"),
        (struct.pack("<II", 1, 0) + _entry("w", struct.pack("<BBHI", 1, 0, 0, 999), 1), "names WEIGHTS entry 999"),
        (
            struct.pack("<II", 1, 0)
            + _entry("w", struct.pack("<BBHI", 1, 0, 0, 0) + struct.pack("<BBH2q", 4, 2, 0, 0, 0), 2),
            "not a permutation",
        ),
        (struct.pack("<II", 1, 0) + _entry("w", struct.pack("<BBHQQ", 2, 0, 0, 4096, 8), 1), "outside the section"),
        (  # a 2 x 3 float32 entry is 24 bytes: its size is checked first, then where the bytes lie
            struct.pack("<II", 1, 0) + _entry("w", struct.pack("<BBHQQ", 2, 0, 0, 4096, 24), 1, sizes=(2, 3)),
            "outside the section",
        ),
        (
            struct.pack("<II", 1, 0) + _entry("w", struct.pack("<BBHQQ", 2, 0, 0, 4096, 16), 1, sizes=(2, 3)),
            "16 raw bytes, not the entry's size",
        ),
        (struct.pack("<II", 1, 0) + _entry("w", struct.pack("<BBH", 3, 6, 0), 1), "has no tensor to work on"),
        (struct.pack("<II", 1, 0) + _entry("w", struct.pack("<BBHI", 1, 0, 0, 0) * 2, 2), "leaves 2 tensors"),
        (struct.pack("<II", 2, 0) + _entry("w", struct.pack("<BBHI", 1, 0, 0, 0), 1) * 2, "repeats the name"),
        (struct.pack("<II", 1, 1), "reserved field is not zero"),
    ],
)
def test_reader_checks_refit_map_structure(lowered, payload, message):
    from et_tensorrt.format import _reader

    (both,) = delegate_blobs(lowered["both"])
    data = _with_refit_map(both, payload)
    with pytest.raises(BlobFormatError, match=message):
        _reader.parse_blob(data)


def test_reader_accepts_a_valid_refit_map(refit_blob):
    parsed = read_blob(refit_blob)
    assert parsed.refit_entries and parsed.version == 3
