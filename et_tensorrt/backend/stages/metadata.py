"""Stage ``metadata``: the blob's METADATA begins with the toolchain, precision, target archs, execution
device, node count, weights mode and quantization (what legalize_quant kept and dropped); later stages add
what they did (cache, onnx, validation, build, refit)."""

from __future__ import annotations

from et_tensorrt import trt
from et_tensorrt.backend.stages.job import PartitionJob


def run(job: PartitionJob) -> None:
    job.metadata = {
        "trt_flavour": trt.flavour(),
        "trt_version": trt.version(),
        "precision": job.build.precision,
        "target_archs": list(job.settings.target_archs),
        "execution_device": job.device,
        "nodes": job.n_nodes,
        "weights": job.build.weights,
    }
    if job.build.cuda_graph:  # the one entry the runtime reads (runtime/executors.py)
        job.metadata["cuda_graph"] = True
    if job.quantization is not None:
        job.metadata["quantization"] = job.quantization
