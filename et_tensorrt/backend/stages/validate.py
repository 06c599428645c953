"""Stage ``validate`` (skipped on a cache hit): the checks before the build. A float64 node is refused
(TensorRT would silently narrow it); with ``validate`` on, onnxruntime runs the ONNX against the aten program
(backend/validation.py; with states, several consecutive calls: backend/state_validation.py). A refusal
leaves the partition to the host as a failed build does (build.fall_back)."""

from __future__ import annotations

import logging

from torch.export import ExportedProgram

from et_tensorrt.backend.stages.build import fall_back
from et_tensorrt.backend.stages.job import PartitionJob
from et_tensorrt.backend.state_validation import validate_steps
from et_tensorrt.backend.validation import ValidationInconclusive
from et_tensorrt.backend.validation import validate as validate_onnx
from et_tensorrt.builder.onnx_export import OnnxExport, find_float64
from et_tensorrt.errors import EngineBuildError

logger = logging.getLogger("et_tensorrt")


def _validation(aten_ep: ExportedProgram, export: OnnxExport, precision: str, label: str, states) -> dict:
    try:
        if states:  # the state carried over consecutive calls, as the delegate will
            return {"validation_max_abs_error": validate_steps(aten_ep, export, states, precision)}
        return {"validation_max_abs_error": validate_onnx(aten_ep, export, precision)}
    except ValidationInconclusive as exc:  # nothing compared: say so, build anyway
        logger.warning("%s: ONNX not validated: %s", label, exc)
        return {"validation_inconclusive": str(exc)}


def run(job: PartitionJob) -> None:
    try:
        f64 = find_float64(job.aten_ep)
        if f64 is not None:
            raise EngineBuildError(
                f"node {f64} uses float64, which TensorRT silently narrows to float32; "
                "cast the model to float32 or keep this op on the host"
            )
        if job.build.validate:
            job.validation = _validation(job.engine_ep, job.export, job.build.precision, job.label, job.states)
            job.metadata.update(job.validation)
    except EngineBuildError as exc:
        fall_back(job, exc)
