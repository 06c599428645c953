"""Stage ``serialize``: the blob (docs/blob-format.md, et_tensorrt/blob.py ``write_blob``) with the I/O table,
engine, embedded program, REFIT_MAP, STATE table, RECIPE and metadata; a REFIT_MAP and a RECIPE are verified
against the written blob, and the export is recorded for the active ``record_exports()``."""

from __future__ import annotations

from et_tensorrt import blob as blob_mod
from et_tensorrt.backend.stages.job import PartitionExport, PartitionJob, _recorders


def state_table(states) -> bytes:
    """The blob's STATE section for the partition's states (state_lifting.State)."""
    from et_tensorrt import state_table as table

    entries = []
    for s in states:
        guard = s.guard
        entries.append(
            table.StateEntry(
                name=s.buffer,
                dtype=s.dtype,
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
            )
        )
    return table.encode_state_table(entries)


def _verify_refit(export, data: bytes) -> None:
    """Every ONNX initializer rebuilt from the written blob (through the C++ reader's parse of WEIGHTS and
    REFIT_MAP, as the runtime will) equals the bytes the engine was built with; EngineBuildError otherwise."""
    from et_tensorrt.backend.refit_derivation import verify_refit_map
    from et_tensorrt.embedded_program.loader import weight_tensors

    blob = blob_mod.read_blob(data)
    names = [w.name for w in blob.weights]
    verify_refit_map(export, blob.refit_entries, weight_tensors(blob), blob.refit_map, names)


def run(job: PartitionJob) -> None:
    exec_type, exec_index = job.exec_device
    data = job.blob = blob_mod.write_blob(
        job.io_entries,
        engine=job.engine,
        graph=job.graph,
        weights=job.weights,
        refit_map=job.refit.payload if job.refit is not None else None,
        state=state_table(job.states) if job.states else None,
        recipe=job.recipe,
        metadata=job.metadata,
        exec_device_type=exec_type,
        exec_device_index=exec_index,
    )
    if job.refit is not None:
        _verify_refit(job.export, data)
    if job.recipe is not None and job.export is not None:  # a hit's recipe was verified when it was stored
        from et_tensorrt.backend.recipe_derivation import verify_written

        verify_written(job.export, blob_mod.read_blob(data))
    if _recorders:
        digest = blob_mod.program_digest(blob_mod.read_blob(data))
        for exports in _recorders:
            exports[digest] = PartitionExport(job.label, job.build, job.export)
