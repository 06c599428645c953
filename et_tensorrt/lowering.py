"""One call from a model to a `.pte`: export -> TensorRTPartitioner -> to_executorch."""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional, Sequence

import torch

_PARTITIONER_OPTIONS = (
    "target_device", "min_block_size", "torch_executed_ops", "require_full_compilation", "opt_sizes"
)


def _split_options(options: Mapping[str, Any]) -> tuple[dict, dict]:
    """Partitioner keyword arguments vs build options (compile specs, by short or full key)."""
    from . import compile_specs as cs

    short = {
        "precision": cs.PRECISION,
        "target_archs": cs.TARGET_ARCHS,
        "validate": cs.VALIDATE,
        "pass_through_build_failures": cs.PASS_THROUGH_BUILD_FAILURES,
        "workspace_bytes": cs.WORKSPACE_BYTES,
    }
    partitioner, specs = {}, {}
    for key, value in options.items():
        if key in _PARTITIONER_OPTIONS:
            partitioner[key] = value
        elif key in short:
            specs[short[key]] = value
        elif key.startswith("et_tensorrt."):
            specs[key] = value
        else:
            raise TypeError(f"unknown lowering option {key!r}; expected one of "
                            f"{sorted(_PARTITIONER_OPTIONS + tuple(short))}")
    return partitioner, specs


def lower(
    model: torch.nn.Module | torch.export.ExportedProgram,
    example_inputs: Sequence[torch.Tensor] = (),
    *,
    dynamic_shapes: Optional[Any] = None,
    zero_copy_inputs: bool = True,
    zero_copy_outputs: bool = False,
    **options: Any,
) -> bytes:
    """Lower a model (or an ExportedProgram) to ExecuTorch program bytes with our delegate.

    ``zero_copy_inputs=True`` leaves method inputs out of ExecuTorch's memory plan, so the runtime
    (and our delegate) see the caller's own pointers instead of a copy in a planned buffer.
    ``zero_copy_outputs=True`` leaves method outputs unplanned too: :class:`Runner` then writes them
    into the caller's ``outputs`` tensors (e.g. on the GPU) or into tensors it allocates; ExecuTorch's
    own Python runtime cannot run such a program (it has no memory for the outputs).
    Other options go to :class:`TensorRTPartitioner` (``target_device``, ``min_block_size``,
    ``torch_executed_ops``, ``require_full_compilation``, ``opt_sizes``) or become compile specs (``precision``,
    ``target_archs``, ``validate``, ``pass_through_build_failures``, ``workspace_bytes``).
    """
    from executorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower
    from executorch.exir.passes import MemoryPlanningPass

    from .backend import EtTensorRTBackend  # noqa: F401  (ExecuTorch finds preprocess by class name)
    from .partition import TensorRTPartitioner

    partitioner_options, specs = _split_options(options)
    if isinstance(model, torch.export.ExportedProgram):
        program = model
    else:
        program = torch.export.export(model, tuple(example_inputs), dynamic_shapes=dynamic_shapes)
    partitioner = TensorRTPartitioner(**partitioner_options, compile_specs=specs)
    edge = to_edge_transform_and_lower(program, partitioner=[partitioner])
    config = ExecutorchBackendConfig(
        memory_planning_pass=MemoryPlanningPass(
            alloc_graph_input=not zero_copy_inputs, alloc_graph_output=not zero_copy_outputs
        )
    )
    lower.last_report = partitioner.report
    return edge.to_executorch(config).buffer


lower.last_report = None


def save(path: str | os.PathLike, *args: Any, **kwargs: Any) -> bytes:
    """:func:`lower`, then write the program to ``path``; returns the bytes too."""
    data = lower(*args, **kwargs)
    with open(path, "wb") as f:
        f.write(data)
    return data
