"""Stage ``recipe`` (skipped on a cache hit, whose entry carries it): with ``device_build`` on, the partition's
RECIPE (backend/recipe_derivation.py): the ONNX graph without weight bytes, a recipe per initializer over the
embedded program's WEIGHTS (verified byte for byte against the export), and the build header, naming the engine
the build stage is about to make ahead of time. The build stage stores it in the cache entry; embed keeps it
only beside an engine and the WEIGHTS it reads."""

from __future__ import annotations

import logging

from et_tensorrt import trt
from et_tensorrt.backend.recipe_derivation import aot_engine, derive_recipe
from et_tensorrt.backend.stages.job import PartitionJob

logger = logging.getLogger("et_tensorrt")


def run(job: PartitionJob) -> None:
    if not job.build.device_build or job.fallback is not None or job.program is None:
        return
    plan = derive_recipe(
        job.export,
        job.program[1],
        job.aten_ep,
        job.build.precision,
        job.build.workspace_bytes,
        aot_engine(job.settings.target_archs, trt.local_sm()),
    )
    job.recipe, job.recipe_map = plan.payload, plan.map
    logger.debug(
        "%s: recipe %d B (graph %d B, %d B raw)", job.label, len(plan.payload), plan.graph_bytes, plan.raw_bytes
    )
