"""Stage ``cast_precision``: with ``precision="fp16"``/``"bf16"`` the aten partition is rewritten into that
precision (backend/precision.py: weights cast once, mutated buffers stored in it, casts at the boundary and where
an op needs one dtype). Every later stage sees that program: the states are lifted in the engine's precision, the
ONNX is exported as it is, and the embedded program (the PyTorch fallback) computes what the engine computes."""

from __future__ import annotations

from et_tensorrt.backend.precision import in_precision
from et_tensorrt.backend.stages.job import PartitionJob


def run(job: PartitionJob) -> None:
    job.aten_ep = in_precision(job.aten_ep, job.build.precision)
