"""Quantized programs lower into engines (issue 28): PT2E (XNNPACK's quantizer and ours), torchao int8 / int4
weight-only and 8da4w, and ExecuTorch's llama with 8da4w.

Each case lowers into one partition with every Q/DQ inside the engine, its ONNX checked by onnxruntime
(``validate=True``), and runs through ``Runner`` within 2 % of the output's absmax of the quantized eager model
(8da4w: its weight-only reading). No GPU here: the Runner runs the embedded program, which keeps the quantized
weights (int4 packed) and computes what the engine computes. Sizes against fp32 are measured by
``scripts/bench_quantized.py`` (docs/benchmarks.md), on the issue's model sizes.
"""

from __future__ import annotations

import warnings

import onnx
import pytest
import torch

import et_tensorrt
from et_tensorrt import QuantizationError, QuantizationWarning
from et_tensorrt.backend.stages.job import record_exports
from et_tensorrt.builder import onnx_weights
from et_tensorrt.format import blob as B
from et_tensorrt.format.dtypes import scalar_type_code
from et_tensorrt.inspection import delegate_blobs, format_program, inspect_bytes
from et_tensorrt.testing import Tester, decoders
from et_tensorrt.testing import quantized_models as qm

CONV_INPUT = (torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(1)),)
MLP_INPUT = (torch.randn(4, 128, generator=torch.Generator().manual_seed(2)),)


def _model(case: str) -> tuple[torch.nn.Module, tuple]:
    torch.manual_seed(0)
    if case in qm.PT2E_CASES:
        return qm.ConvNet().eval(), CONV_INPUT
    return qm.Mlp().eval(), MLP_INPUT


class Lowered:
    def __init__(self, case: str):
        model, inputs = _model(case)
        self.case = case
        self.quantized = qm.quantize(case, model, inputs)
        self.tester = Tester(self.quantized, inputs, min_block_size=1, validate=True)
        with warnings.catch_warnings(record=True) as self.warnings, record_exports() as exports:
            warnings.simplefilter("always")
            self.tester.lower()
        (self.export,) = [e.export for e in exports.values()]
        self.onnx = onnx.load_from_string(self.export.model_bytes)
        self.tester.run_runner()

    def dropped_warning(self) -> str:
        texts = [str(w.message) for w in self.warnings if issubclass(w.category, QuantizationWarning)]
        return "\n".join(texts)

    def onnx_nodes(self, op_type: str) -> list:
        return [n for n in self.onnx.graph.node if n.op_type == op_type]


@pytest.fixture(scope="module", params=["pt2e_xnnpack", "pt2e_tensorrt", *qm.TORCHAO_CASES])
def lowered(request) -> Lowered:
    return Lowered(request.param)


def test_one_partition_every_qdq_inside(lowered):
    lowered.tester.check_partitions(1).check_delegated_all()
    ops = {d.op for d in lowered.tester.report.nodes}
    quant_ops = {op for op in ops if op.startswith(("quantized_decomposed.", "torchao."))}
    assert quant_ops, f"ExecuTorch decomposed the quantize/dequantize ops: {sorted(ops)}"
    # the top-level program is only the delegate call: no quantize op left for a host kernel
    (method,) = inspect_bytes(lowered.tester.pte).methods
    assert not method.operators, method.operators


EXPECTED = {
    # case: (weights, kept activation Q/DQ, dropped activation Q/DQ)
    "pt2e_xnnpack": ({"int8": 3}, {}, 5),  # XNNPACK's activations carry a zero point: they run in float
    "pt2e_tensorrt": ({"int8": 3}, {"int8": 3}, 0),  # every Q/DQ a TensorRT Q/DQ
    "int8_weight_only": ({"int8": 2}, {}, 0),
    "int4_weight_only": ({"int4": 2}, {}, 0),
    "8da4w": ({"int4": 2}, {}, 2),  # dynamic per-token activations run in float
}


def test_quantization_kept_and_dropped(lowered):
    weights, activations, dropped = EXPECTED[lowered.case]
    lowered.tester.check_quantization(weights=weights, activations=activations, dropped=dropped)
    warning = lowered.dropped_warning()
    if dropped:
        assert f"{dropped} activation quantize/dequantize pair(s)" in warning, warning
        assert "strict_quantization=True" in warning
    else:
        assert not warning


def test_runner_matches_the_quantized_eager_model(lowered):
    lowered.tester.check_quantized_parity(qm.reference(lowered.case, lowered.quantized))


def test_onnx_quantized_as_tensorrt_takes_it(lowered):
    """Validated by onnxruntime (METADATA), symmetric (no zero point), weights stored quantized: int4 as INT4
    initializers packed two per byte, in blocks of 32 along the input dim."""
    ((blob, _),) = lowered.tester.lowered_blobs()
    assert "validation_max_abs_error" in blob.metadata, blob.metadata
    initializers = {i.name: i for i in lowered.onnx.graph.initializer}
    dequantize = [n for n in lowered.onnx_nodes("DequantizeLinear") if n.input[0] in initializers]
    weights = [initializers[n.input[0]] for n in dequantize]
    weight_types = sorted({onnx.TensorProto.DataType.Name(w.data_type) for w in weights})
    assert all(len(n.input) == 2 for n in lowered.onnx_nodes("DequantizeLinear")), "a zero point reached the ONNX"
    if lowered.case in ("int4_weight_only", "8da4w"):
        assert weight_types == ["INT4"]
        held = dict(onnx_weights.initializers(lowered.export))
        for w, node in zip(weights, dequantize):
            packed = held[w.name]  # held outside the protobuf (builder/onnx_weights.py), as its packed bytes
            assert packed.dtype == torch.uint8 and packed.numel() == torch.Size(w.dims).numel() // 2
            assert {a.name: a.i for a in node.attribute}["block_size"] == qm.GROUP_SIZE
    else:
        assert weight_types == ["INT8"]
    quantize = lowered.onnx_nodes("QuantizeLinear")
    assert len(quantize) == EXPECTED[lowered.case][1].get("int8", 0)
    assert lowered.export.opset >= 21


def test_embedded_program_keeps_quantized_weights(lowered):
    """The program the PyTorch fallback runs holds the quantized weights (int4 packed into uint8), not float
    copies: its float bytes (scales and biases) are a small share."""
    (blob,) = [b for b, _ in lowered.tester.lowered_blobs()]
    by_dtype: dict = {}
    for w in blob.weights:
        by_dtype[w.dtype] = by_dtype.get(w.dtype, 0) + w.nbytes
    quantized = by_dtype.get(scalar_type_code(torch.uint8 if "int4" in EXPECTED[lowered.case][0] else torch.int8), 0)
    assert quantized > 2 * by_dtype.get(scalar_type_code(torch.float32), 0), by_dtype


def test_inspect_shows_the_precision(lowered):
    text = format_program(inspect_bytes(lowered.tester.pte))
    weights, activations, dropped = EXPECTED[lowered.case]
    line = next(line for line in text.splitlines() if "quantized:" in line)
    assert f"weights {next(iter(weights))}" in line, line
    assert ("activations int8" if activations else "activations fp32") in line, line
    assert ("dropped" in line) == bool(dropped), line


# ------------------------------------------------------------------------------- refusals, before any work


def test_strict_quantization_refuses_before_any_work():
    model, inputs = _model("8da4w")
    qm.refused_before_any_work(
        qm.quantize_torchao(model, "8da4w"),
        inputs,
        r"(?s)dynamic quantization.*strict_quantization=True refuses",
        strict_quantization=True,
    )


def test_asymmetric_weights_are_refused_naming_the_op():
    from torchao.quantization import IntxWeightOnlyConfig, MappingType
    from torchao.quantization.granularity import PerGroup

    model, inputs = _model("int4_weight_only")
    config = IntxWeightOnlyConfig(torch.int4, PerGroup(32), mapping_type=MappingType.ASYMMETRIC)
    model = qm.quantize_torchao_with(model, config)
    qm.refused_before_any_work(model, inputs, r"(?s)torchao\.dequantize_affine.*zero point is not 0.*symmetric")


def test_a_quantize_op_left_on_the_host_is_an_error_not_missing_out_variants():
    model, inputs = _model("int8_weight_only")
    quantized = qm.quantize_torchao(model, "int8_weight_only")
    info = qm.refused_before_any_work(quantized, inputs, torch_executed_ops=["aten.addmm.default"])
    message = str(info.value)
    assert "nothing was built" in message and "torchao.dequantize_affine.default" in message, message
    assert "where ExecuTorch has no kernel for it" in message and "stays on the host" in message, message
    assert "Missing out variants" not in message


# ------------------------------------------------------------------------------------------------- FP8


@pytest.fixture(scope="module")
def fp8_model():
    from executorch.exir import EdgeCompileConfig

    from et_tensorrt.quantization import TensorRTQuantizer, get_fp8_config

    model, inputs = _model("pt2e_tensorrt")
    converted = qm.quantize_pt2e_with(model, inputs, TensorRTQuantizer(get_fp8_config()))
    # ExecuTorch 1.5.1's edge verifier refuses FP8 Q/DQ ops (its dtype constraints): skip its IR check
    return converted, inputs, EdgeCompileConfig(_check_ir_validity=False)


def test_fp8_needs_fp8_target_archs(fp8_model):
    converted, inputs, config = fp8_model
    with pytest.raises(QuantizationError, match=r"FP8.*target archs.*sm89"):
        Tester(converted, inputs, edge_compile_config=config, min_block_size=1).lower()
    with pytest.raises(QuantizationError, match=r"\['sm86'\] have no FP8"):
        Tester(converted, inputs, edge_compile_config=config, min_block_size=1, target_archs=["sm86"]).lower()


def test_fp8_engine_builds_for_sm89(fp8_model, monkeypatch, fresh_engine_cache):
    """With its weights as named data, and every external FP8 weight bound to onnxruntime as a float8 OrtValue
    over the tensor (none inlined), validation included (an empty cache: a hit would skip the validation)."""
    monkeypatch.setattr(onnx_weights, "ORT_INLINE_BYTES", 0)
    converted, inputs, config = fp8_model
    tester = Tester(
        converted,
        inputs,
        edge_compile_config=config,
        min_block_size=1,
        validate=True,
        target_archs=["sm89"],
        named_data="pte",
    )
    tester.lower().check_partitions(1).check_delegated_all()
    (blob,) = [B.read_blob(b) for b in delegate_blobs(tester.pte)]
    assert blob.named and blob.recipe.usable and "validation_max_abs_error" in blob.metadata
    tester.check_quantization(weights={"float8_e4m3fn": 3}, activations={"float8_e4m3fn": 3})
    tester.run_runner().check_quantized_parity(converted, share=0.05)  # PT2E's FP8 reference rounds to integers


# ---------------------------------------------------------------------------------- ExecuTorch's llama, 8da4w


def test_executorch_llama_8da4w_decodes_in_one_engine():
    decoder = decoders.executorch_llama(quantize="8da4w")
    with pytest.warns(QuantizationWarning, match="dropped"):
        pte = et_tensorrt.lower(decoder.program)
    report = et_tensorrt.lower.last_report
    assert len(report.partitions) == 1 and not report.host_nodes, str(report)
    steps = decoders.decode(decoder, pte, [3, 5, 7, 11, 13, 2, 9, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24], prompt=1)
    assert len(steps) >= 16
    assert max(s.max_error for s in steps) <= 1e-4  # against its weight-only eager reading
    assert all(s.state_bytes == 0 for s in steps)
    assert "weights int4 (15)" in format_program(inspect_bytes(pte))


def test_int4_weights_lower_as_named_data_the_recipe_rebuilds_them_packed(monkeypatch):
    """Every initializer external (threshold 0): the packed INT4 ones go to onnxruntime inline (an OrtValue cannot
    say int4), the weights are named data once, and the RECIPE rebuilds the INT4 initializers from those packed
    WEIGHTS (no raw copy)."""
    monkeypatch.setattr(onnx_weights, "DEFAULT_THRESHOLD", 0)
    monkeypatch.setattr(onnx_weights, "ORT_INLINE_BYTES", 0)
    model, inputs = _model("int4_weight_only")
    quantized = qm.quantize_torchao(model, "int4_weight_only")
    tester = Tester(quantized, inputs, min_block_size=1, validate=True, named_data="pte", cache=False).lower()
    (blob,) = [B.read_blob(b) for b in delegate_blobs(tester.pte)]
    assert blob.named and blob.engine is None and "validation_max_abs_error" in blob.metadata
    packed = [e for e in blob.recipe.entries if e.name.endswith("_int4")]
    assert len(packed) == 2 and not any(e.raw for e in blob.recipe.entries)
    tester.run_runner().check_quantized_parity(quantized)


def test_int4_weights_refuse_the_refit_mode_before_any_work(monkeypatch):
    # as on a machine whose builder can make refittable engines (a GPU): INT4 refuses refit for its own reason
    monkeypatch.setattr(et_tensorrt.trt, "option_problems", lambda target_archs, weights: [])
    model, inputs = _model("int4_weight_only")
    quantized = qm.quantize_torchao(model, "int4_weight_only")
    qm.refused_before_any_work(quantized, inputs, r"weights='refit' cannot refit INT4", weights="refit")
