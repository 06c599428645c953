"""Quantized programs and TensorRT.

* :class:`TensorRTQuantizer` (``quantizer.py``): a PT2E quantizer in TensorRT's convention — activations int8
  per tensor and weights int8 per channel, both symmetric — so ``prepare_pt2e``/``convert_pt2e`` programs lower
  into engines that run int8 Q/DQ (``get_symmetric_config``; ``get_fp8_config`` for FP8 E4M3 per tensor).
* ``qdq.py``: how the partitioner and the legalization stage read quantize/dequantize nodes (PT2E's and
  torchao's) and what TensorRT does with each; the rule for the activation quantization TensorRT cannot express
  is there, and in docs/quantization.md.

The quantizer imports torchao's PT2E API; it is loaded on first use, so the partitioner (which reads ``qdq``)
does not pay for it.
"""

from __future__ import annotations

__all__ = ["TensorRTQuantizer", "get_fp8_config", "get_symmetric_config"]


def __getattr__(name: str):
    if name in __all__:
        from .._quiet import quiet_dependencies

        with quiet_dependencies():  # importing torchao: "Failed to load ....so", pytree's Enum deprecation
            from . import quantizer

        return getattr(quantizer, name)
    raise AttributeError(f"module 'et_tensorrt.quantization' has no attribute {name!r}")
