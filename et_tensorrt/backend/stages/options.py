"""Stage ``options``: the compile specs decoded into the job's options, BuildOptions, BuildSettings, execution
device and label; the partition is counted (``stats["partitions"]``)."""

from __future__ import annotations

import logging

from et_tensorrt import compile_specs as cs
from et_tensorrt.backend.stages.job import PartitionJob, _engine_counter, stats
from et_tensorrt.builder.engine_builder import BuildSettings
from et_tensorrt.format import blob as blob_mod

logger = logging.getLogger("et_tensorrt")


def run(job: PartitionJob) -> None:
    options = job.options = cs.decode(job.compile_specs)
    unknown = sorted(set(options) - cs.KNOWN_KEYS)
    if unknown:
        logger.warning("ignoring unknown compile specs: %s", ", ".join(unknown))
    build = job.build = cs.BuildOptions.from_specs(options)
    if build.named_data == "auto":  # what several methods share (weights, engines) stored once
        build = job.build = build.replace(named_data="pte" if job.methods > 1 else "off")
    job.device = options.get(cs.EXECUTION_DEVICE, "cuda:0").strip()
    job.exec_device = blob_mod.device_code(job.device)
    job.settings = BuildSettings(
        precision=build.precision,
        target_archs=build.target_archs,
        workspace_bytes=build.workspace_bytes,
        strip_weights=build.weights == "refit",
    )

    seq = next(_engine_counter)
    job.label = f"engine {options.get(cs.PARTITION_INDEX, seq)}"
    if cs.PARTITION_COUNT in options:
        job.label += f"/{options[cs.PARTITION_COUNT]}"
    stats["partitions"] += 1
    job.n_nodes = sum(1 for n in job.edge_program.graph.nodes if n.op == "call_function")
