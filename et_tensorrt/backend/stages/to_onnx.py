"""Stage ``to_onnx`` (skipped on a cache hit): the engine program exported to ONNX in memory
(builder/onnx_export.py), its trailing inputs and outputs named as the states' bindings; the export's facts
go to the metadata (and to the cache entry build stores)."""

from __future__ import annotations

import logging
import time

import torch
from torch.export import ExportedProgram

from et_tensorrt import compile_specs as cs
from et_tensorrt.backend.stages.job import PartitionJob
from et_tensorrt.builder.edge_to_aten import user_input_nodes, user_output_nodes
from et_tensorrt.builder.engine_builder import profile_shapes
from et_tensorrt.builder.onnx_export import OnnxExport, export_onnx

logger = logging.getLogger("et_tensorrt")


def record_devices(export, recorded: ExportedProgram) -> None:
    """The engine's I/O devices as the partition recorded them (the export ran on the host form)."""
    values = [n.meta["val"] for n in user_input_nodes(recorded)] + [
        o.meta["val"] for o in user_output_nodes(recorded) if isinstance(o, torch.fx.Node)
    ]
    for info, val in zip(export.inputs + export.outputs, values):
        if isinstance(val, torch.Tensor):  # a size input (a SymInt passed by value) has no device
            info.device = val.device


def export_program(job: PartitionJob) -> OnnxExport:
    """The ONNX export of the engine program, its trailing inputs and outputs named as the states' bindings,
    its I/O devices those the partition recorded."""
    states = job.states
    export = export_onnx(job.engine_ep, job.build.unbounded_max_factor, job.dynamic_dims)
    export.state_count = len(states)
    n_in, n_out = len(export.inputs) - len(states), len(export.outputs) - len(states)
    for i, state in enumerate(states):
        state.input_name, state.output_name = export.inputs[n_in + i].name, export.outputs[n_out + i].name
        if state.in_place:
            export.aliased[state.output_name] = state.input_name
    record_devices(export, job.recorded)
    return export


def _profiles_metadata(export) -> list:
    """Per optimization profile: engine input name -> [[min, opt, max], ...] (informational)."""
    return [
        {info.name: [[d.min, d.opt, d.max] for d in dims] for info, dims in zip(export.engine_inputs, shapes)}
        for shapes in profile_shapes(export)
    ]


def run(job: PartitionJob) -> None:
    if job.export is None:  # cache_lookup exports when a hit must be checked against the ONNX
        t0 = time.perf_counter()
        job.export = export_program(job)
        job.export.seconds = time.perf_counter() - t0
    export = job.export
    export_metadata = job.export_metadata = {"onnx_opset": export.opset, "profile_max_picked": export.picked_max}
    if job.states:
        export_metadata["state_bindings"] = [[s.input_name, s.output_name] for s in job.states]
    if export.profile_count > 1 or any(i.is_size for i in export.inputs):
        export_metadata["optimization_profiles"] = _profiles_metadata(export)
    job.metadata.update(export_metadata, onnx_seconds=round(export.seconds, 3))
    if export.picked_max:
        logger.info(
            "%s: unbounded dynamic dims built up to %s (compile spec %s)",
            job.label,
            export.picked_max,
            cs.UNBOUNDED_MAX_FACTOR,
        )
