"""Stage ``serialize``: the blob (docs/blob-format.md, et_tensorrt/format/blob.py ``write_blob``) with the I/O table,
engine, embedded program, REFIT_MAP, STATE table, RECIPE, INPUT_GUARDS and metadata; a REFIT_MAP and a RECIPE are
verified against the written blob, and the export is recorded for the active ``record_exports()``."""

from __future__ import annotations

from et_tensorrt.backend.input_guards import input_guards
from et_tensorrt.backend.refit_derivation import verify_refit_map
from et_tensorrt.backend.stages.job import PartitionExport, PartitionJob, _recorders
from et_tensorrt.embedded_program.loader import weight_views
from et_tensorrt.format import blob as blob_mod
from et_tensorrt.format import state_table as table
from et_tensorrt.format.dtypes import scalar_type_code


def state_table(states, shared: dict[str, tuple[str, ...]] | None = None) -> bytes:
    """The blob's STATE section for the partition's states (state_lifting.State); ``shared``: buffer name -> the
    program's methods that declare it too (backend/state_sharing.py)."""
    shared = shared or {}
    entries = []
    for s in states:
        guard = s.guard
        entries.append(
            table.StateEntry(
                name=s.buffer,
                dtype=scalar_type_code(s.dtype),
                shape=s.shape,
                input_name=s.input_name,
                output_name=s.output_name,
                update=table.UPDATE_IN_PLACE if s.in_place else table.UPDATE_WRITE_BACK,
                initial=table.initial_bytes(s.initial),
                position_input=guard.input if guard else table.NO_INPUT,
                position_kind=guard.kind if guard else 0,
                length_input=guard.length_input if guard else table.NO_INPUT,
                length_dim=guard.length_dim if guard else 0,
                length_value=guard.length_value if guard else 0,
                methods=shared.get(s.buffer, ()),
            )
        )
    return table.encode_state_table(entries)


def _verify(job: PartitionJob, blob: blob_mod.Blob) -> None:
    """Every ONNX initializer rebuilt from the written blob (through the C++ reader's parse of WEIGHTS, REFIT_MAP and
    RECIPE, as the runtime and the device build will) equals the bytes the engine was built with; EngineBuildError
    otherwise. The weights are read where they are (loader.weight_views: no copy)."""
    names = [w.name for w in blob.weights]
    # named data is the program's own tensors, which ExecuTorch writes as they are
    named = {n.key: job.weights[n.index].tensor for n in blob.named if n.target == blob_mod.NAMED_WEIGHT}
    tensors = weight_views(blob, named)
    if job.refit is not None:
        verify_refit_map(job.export, blob.refit_entries, tensors, blob.refit_map, names)
    if job.recipe is not None and job.export is not None:  # a hit's recipe was verified when it was stored
        if job.refit is not None and bytes(blob.recipe.map) == bytes(blob.refit_map):
            return  # weights="refit" reuses the recipe's map: the same bytes, read by the same reader, just checked
        verify_refit_map(job.export, blob.recipe.entries, tensors, blob.recipe.map, names)


def run(job: PartitionJob) -> None:
    exec_type, exec_index = job.exec_device
    named_engine = any(n.target == blob_mod.NAMED_ENGINE for n in job.named)
    data = job.blob = blob_mod.write_blob(
        job.io_entries,
        engine=None if named_engine else job.engine,
        named=job.named,
        graph=job.graph,
        weights=job.weights,
        refit_map=job.refit.payload if job.refit is not None else None,
        state=state_table(job.states, job.shared_states) if job.states else None,
        recipe=job.recipe,
        metadata=job.metadata,
        guards=input_guards(job.aten_ep),
        exec_device_type=exec_type,
        exec_device_index=exec_index,
    )
    verify = job.refit is not None or (job.recipe is not None and job.export is not None)
    if not verify and not _recorders:
        return
    blob = blob_mod.read_blob(data, copy=False)  # as the runtime reads it (every section's digest checked once)
    if verify:
        _verify(job, blob)
    if _recorders:
        digest = blob_mod.program_digest(blob)
        for exports in _recorders:
            exports[digest] = PartitionExport(job.label, job.build, job.export)
