"""Stage ``to_aten``: the edge partition converted back to an aten ExportedProgram (builder/edge_to_aten.py).

``job.recorded`` keeps the devices the program recorded (the blob's I/O table says them); ``job.aten_ep`` is
the same program on the host (see ``on_host``), the one device that ONNX, validation and the embedded
program use."""

from __future__ import annotations

from et_tensorrt.backend.stages.job import PartitionJob
from et_tensorrt.builder.edge_to_aten import edge_to_aten, on_host


def run(job: PartitionJob) -> None:
    job.recorded = edge_to_aten(job.edge_program)
    job.aten_ep = on_host(job.recorded)
