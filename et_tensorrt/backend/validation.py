"""Check the exported ONNX with onnxruntime against PyTorch on the partition (random inputs)."""

from __future__ import annotations

import torch
from torch.export import ExportedProgram

from et_tensorrt.backend.onnx_export import OnnxExport, example_inputs
from et_tensorrt.errors import ValidationError

TOLERANCES = {"fp32": (1e-3, 1e-4), "fp16": (2e-2, 2e-2), "bf16": (5e-2, 5e-2)}


def validate(ep: ExportedProgram, export: OnnxExport, precision: str = "fp32", seed: int = 0) -> dict:
    """Raise ValidationError when onnxruntime and PyTorch disagree; returns the largest errors."""
    import numpy as np
    import onnxruntime as ort

    inputs = example_inputs(export.inputs, random=True, seed=seed)
    with torch.no_grad():
        expected = ep.module()(*inputs)
    expected = list(expected) if isinstance(expected, (tuple, list)) else [expected]

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    try:
        session = ort.InferenceSession(export.model_bytes, opts, providers=["CPUExecutionProvider"])
        feeds = {}
        for info, value in zip(export.inputs, inputs):
            if value.dtype == torch.bfloat16:
                raise ValidationError("bf16 inputs cannot be fed to onnxruntime")
            feeds[info.name] = value.numpy()
        got = session.run([o.name for o in export.outputs], feeds)
    except ValidationError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise ValidationError(f"onnxruntime could not run the exported ONNX: {exc}") from exc

    rtol, atol = TOLERANCES.get(precision, TOLERANCES["fp32"])
    report = {}
    if len(got) != len(expected):
        raise ValidationError(f"ONNX returns {len(got)} outputs, PyTorch {len(expected)}")
    for info, ref, value in zip(export.outputs, expected, got):
        ref_np = ref.detach().to(torch.float32).numpy() if ref.dtype == torch.bfloat16 else ref.detach().numpy()
        if ref_np.dtype != value.dtype:
            raise ValidationError(f"output {info.name!r}: ONNX dtype {value.dtype}, PyTorch {ref_np.dtype}")
        if ref_np.shape != value.shape:
            raise ValidationError(f"output {info.name!r}: ONNX shape {value.shape}, PyTorch {ref_np.shape}")
        if ref_np.dtype.kind in "fc":
            ok = np.allclose(value, ref_np, rtol=rtol, atol=atol, equal_nan=True)
            err = float(np.max(np.abs(value.astype(np.float64) - ref_np.astype(np.float64)))) if ref_np.size else 0.0
        else:
            ok = np.array_equal(value, ref_np)
            err = 0.0 if ok else float("inf")
        if not ok:
            raise ValidationError(
                f"output {info.name!r}: ONNX differs from PyTorch (max abs error {err:.3g}, rtol {rtol}, atol {atol})"
            )
        report[info.name] = err
    return report
