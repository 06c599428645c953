"""Stage ``embed``: the embedded program (GRAPH: torch.export's JSON, WEIGHTS: raw tensors; nothing pickled,
see et_tensorrt.embedded_program), its refusal raised now (after the build), shaped by the weights mode:
``refit`` derives the REFIT_MAP (backend/refit_derivation.py), ``engine-only`` drops the program (and with it
the recipe), and without an engine the program is kept whatever the mode (and no recipe is written)."""

from __future__ import annotations

import logging

from et_tensorrt.backend.stages.job import PartitionJob

logger = logging.getLogger("et_tensorrt")


def _refit_map(export, weights, aten_ep, label: str, derived=None):
    """The partition's REFIT_MAP: a recipe per ONNX initializer (verified against the blob, see
    serialize._verify_refit); ``derived``: the recipe stage's map of the same export, reused."""
    from et_tensorrt.backend.refit_derivation import derive_refit_map

    plan = derived if derived is not None else derive_refit_map(export, weights, aten_ep)
    if plan.raw_bytes:
        logger.info(
            "%s: refit map stores %d bytes raw (initializers not rebuilt from the program's weights)",
            label,
            plan.raw_bytes,
        )
    return plan


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
