"""Stage ``legalize_quant``: a quantized partition made into what TensorRT runs (builder/quant_legalization.py).
Weight dequantizes and static symmetric activation Q/DQ become ``et_tensorrt::dequantize``/``quantize``
(ONNX QuantizeLinear/DequantizeLinear, int4 weights as packed INT4 initializers: builder/quant_ops.py);
activation quantization TensorRT cannot express is dropped (the activation runs in float, the weights stay
quantized; ``strict_quantization`` refuses); ``job.quantization`` records what was kept and dropped (the
METADATA's ``quantization``, ``inspect``'s precision). A partition without quantization is left as it is."""

from __future__ import annotations

from et_tensorrt.backend.stages.job import PartitionJob
from et_tensorrt.builder.quant_legalization import legalize


def run(job: PartitionJob) -> None:
    job.aten_ep, summary = legalize(job.aten_ep, job.build.strict_quantization)
    job.quantization = summary.as_metadata() if summary is not None else None
