"""Stage ``embed``: the embedded program (GRAPH: torch.export's JSON, WEIGHTS: raw tensors; nothing pickled,
see et_tensorrt.embedded_program), its refusal raised now (after the build), shaped by the weights mode:
``refit`` derives the REFIT_MAP (backend/refit_derivation.py), ``engine-only`` drops the program (and with it
the recipe), and without an engine the program is kept whatever the mode (and no recipe is written). With
``named_data`` the engine's and the weights' bytes become ExecuTorch named data (builder/named_data.py): the blob
names their keys; its WEIGHTS table still describes every weight, so a RECIPE (and a REFIT_MAP) rebuild their
initializers from the named bytes, stored once; each entry records the CRC-32 the delegate checks the named bytes
against at init."""

from __future__ import annotations

import logging

from et_tensorrt.backend.refit_derivation import derive_refit_map
from et_tensorrt.backend.stages.job import PartitionJob
from et_tensorrt.builder import named_data
from et_tensorrt.format import blob as blob_mod

logger = logging.getLogger("et_tensorrt")


def _refit_map(export, weights, aten_ep, label: str, derived=None):
    """The partition's REFIT_MAP: a recipe per ONNX initializer (verified against the blob, see
    serialize._verify_refit); ``derived``: the recipe stage's map of the same export, reused."""
    plan = derived if derived is not None else derive_refit_map(export, weights, aten_ep)
    if plan.raw_bytes:
        logger.info(
            "%s: refit map stores %d bytes raw (initializers not rebuilt from the program's weights)",
            label,
            plan.raw_bytes,
        )
    return plan


def _named(job: PartitionJob) -> None:
    """The engine and every non-empty weight as named data under their content keys (no copy: the engine stays in
    its file, the weights in the program's memory, until ExecuTorch writes them)."""
    entries = [job.program_marker] if job.program_marker is not None else []
    if job.engine is not None:
        key = named_data.engine_key(job.engine)
        job.named.append(blob_mod.NamedRef(blob_mod.NAMED_ENGINE, 0, key, len(job.engine), job.engine.crc32()))
        entries.append((key, job.engine))
    for i, w in enumerate(job.weights if job.graph is not None else ()):
        if w.tensor.numel() == 0:
            continue
        key, data = named_data.tensor_data(w.tensor)
        job.named.append(blob_mod.NamedRef(blob_mod.NAMED_WEIGHT, i, key, len(data), data.crc32()))
        entries.append((key, data))
    job.data_store = named_data.data_store(entries, job.build.named_data)
    job.metadata["named_data"] = job.build.named_data


LARGE_BLOB = 512 * 2**20  # bytes of engine and weights in one blob from which named data is suggested


def _hint_named_data(job: PartitionJob) -> None:
    """A blob that carries hundreds of MB is held whole in memory until the program is written (and then read
    whole by ``lower()``'s bytes): say what keeps a large model's lowering bounded."""
    size = (len(job.engine) if job.engine is not None else 0) + sum(
        w.tensor.numel() * w.tensor.element_size() for w in (job.weights if job.graph is not None else ())
    )
    if size >= LARGE_BLOB:
        logger.warning(
            "%s: its blob holds %.1f GiB of engine and weights, in memory until the program is written; for a "
            "large model lower with named_data='ptd' and et_tensorrt.save (or `et-tensorrt lower --named-data ptd`): "
            "they are then written from where they are, once per program",
            job.label,
            size / 2**30,
        )


def run(job: PartitionJob) -> None:
    # The embedded program (checked by the runtime's own safe-loader checks).
    if job.program_error is not None:
        raise job.program_error
    job.graph, job.weights = job.program
    weights_mode = job.build.weights
    if job.engine is not None and weights_mode == "refit":
        job.refit = _refit_map(job.export, job.weights, job.aten_ep, job.label, job.recipe_map)
        job.metadata.update(refit_entries=len(job.refit.entries), refit_raw_bytes=job.refit.raw_bytes)
    elif job.engine is not None and weights_mode == "engine-only":
        job.graph, job.weights = None, []  # the smallest blob: runs only where the engine deserializes
        if job.recipe is not None:
            job.metadata["device_build_dropped"] = "engine-only: no WEIGHTS to rebuild the recipe's initializers from"
    elif job.engine is None and weights_mode != "both":
        job.metadata["weights_mode_dropped"] = f"{weights_mode}: no engine was built, the program is kept"
    if job.engine is None or job.graph is None:
        job.recipe = None  # a recipe beside the engine it rebuilds and the WEIGHTS it reads, only
    if job.recipe is not None:
        job.metadata["recipe_bytes"] = len(job.recipe)
    if job.build.named_data != "off":
        _named(job)
    else:
        _hint_named_data(job)
        if job.program_marker is not None:  # shared states need the program to carry named data (program_scope.h)
            job.data_store = named_data.data_store([job.program_marker], "pte")
