"""One call from a model to a `.pte`: export -> TensorRTPartitioner -> to_executorch."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from .compile_specs import BuildOptions

_PARTITIONER_OPTIONS = (
    "target_device",
    "min_block_size",
    "torch_executed_ops",
    "require_full_compilation",
    "opt_sizes",
    "own_mutable_buffers",
)


def _split_options(options: Mapping[str, Any], build_options: BuildOptions | None) -> tuple[dict, BuildOptions]:
    """Partitioner keyword arguments vs :class:`BuildOptions` fields (by field name or compile-spec key),
    checked now: an unknown name is a TypeError, a bad value an OptionError."""
    fields = BuildOptions.keys()  # field name -> compile-spec key
    field_of_key = {key: name for name, key in fields.items()}
    partitioner, build = {}, {}
    for key, value in options.items():
        if key in _PARTITIONER_OPTIONS:
            partitioner[key] = value
        elif key in fields or key in field_of_key:
            build[field_of_key.get(key, key)] = value
        else:
            raise TypeError(
                f"unknown lowering option {key!r}; expected one of {sorted(_PARTITIONER_OPTIONS + tuple(fields))}"
            )
    return partitioner, (build_options or BuildOptions()).replace(**build)


def lower(
    model: torch.nn.Module | torch.export.ExportedProgram,
    example_inputs: Sequence[torch.Tensor] = (),
    *,
    dynamic_shapes: Any | None = None,
    zero_copy_inputs: bool = True,
    zero_copy_outputs: bool = False,
    build_options: BuildOptions | None = None,
    constant_methods: Mapping[str, Any] | None = None,
    **options: Any,
) -> bytes:
    """Lower a model (or an ExportedProgram) to ExecuTorch program bytes with our delegate.

    ``zero_copy_inputs=True`` leaves method inputs out of ExecuTorch's memory plan, so the runtime
    (and our delegate) see the caller's own pointers instead of a copy in a planned buffer.
    ``zero_copy_outputs=True`` leaves method outputs unplanned too: :class:`Runner` then writes them
    into the caller's ``outputs`` tensors (e.g. on the GPU) or into tensors it allocates; ExecuTorch's
    own Python runtime cannot run such a program (it has no memory for the outputs).
    Other options go to :class:`TensorRTPartitioner` (``target_device``, ``min_block_size``,
    ``torch_executed_ops``, ``require_full_compilation``, ``opt_sizes``: one TensorRT profile per listed size,
    see docs/dynamic-shapes.md; ``own_mutable_buffers``, default True: the delegate owns the mutable buffers
    its partitions update, such as KV caches, see docs/stateful-decode.md) or are :class:`BuildOptions` fields
    (``precision``, ``target_archs``, ``validate``, ``pass_through_build_failures``, ``workspace_bytes``,
    ``unbounded_max_factor``, ``cache``, ``weights``: ``both``, ``refit`` or ``engine-only``, ``device_build``:
    a RECIPE in each blob so a GPU the engine does not run on builds its own, default True), given one by one
    or as ``build_options`` (keywords override its fields). ``constant_methods``: methods that return a
    constant (ExecuTorch's; an LLM runner reads its ``get_max_seq_len``, ``use_kv_cache``, ... there, see
    :func:`et_tensorrt.llm.llm_methods`).
    Every option is checked before any work: a bad value raises ``OptionError`` (or ``ValueError``).
    """
    from executorch.exir import to_edge_transform_and_lower

    partitioner = make_partitioner(options, build_options)
    program = export(model, example_inputs, dynamic_shapes)
    edge = to_edge_transform_and_lower(
        program, partitioner=[partitioner], constant_methods=dict(constant_methods) if constant_methods else None
    )
    lower.last_report = partitioner.report
    return edge.to_executorch(
        executorch_config(zero_copy_inputs=zero_copy_inputs, zero_copy_outputs=zero_copy_outputs)
    ).buffer


def make_partitioner(options: Mapping[str, Any], build_options: BuildOptions | None = None):
    """The ``TensorRTPartitioner`` :func:`lower` uses for these options (checked here, see ``_split_options``)."""
    from .backend import EtTensorRTBackend  # noqa: F401  (ExecuTorch finds preprocess by class name)
    from .partition import TensorRTPartitioner

    partitioner_options, build = _split_options(options, build_options)
    return TensorRTPartitioner(**partitioner_options, compile_specs=build.to_specs())


def export(
    model: torch.nn.Module | torch.export.ExportedProgram,
    example_inputs: Sequence[torch.Tensor] = (),
    dynamic_shapes: Any | None = None,
    *,
    strict: bool = False,
) -> torch.export.ExportedProgram:
    """``torch.export`` as :func:`lower` does it (an ExportedProgram is taken as it is), constant masks folded."""
    from .partition.constant_masks import fold_constant_masks

    if isinstance(model, torch.export.ExportedProgram):
        program = model
    else:
        program = torch.export.export(model, tuple(example_inputs), dynamic_shapes=dynamic_shapes, strict=strict)
    # Constant boolean masks become integer positions first, so their outputs' sizes are static (explain does too).
    return fold_constant_masks(program)


def executorch_config(*, zero_copy_inputs: bool = True, zero_copy_outputs: bool = False):
    """``to_executorch``'s config for :func:`lower`: ExecuTorch's defaults with method inputs (and, when asked,
    outputs) left out of the memory plan, so the runtime sees the caller's own tensors."""
    from executorch.exir import ExecutorchBackendConfig
    from executorch.exir.passes import MemoryPlanningPass

    return ExecutorchBackendConfig(
        memory_planning_pass=MemoryPlanningPass(
            alloc_graph_input=not zero_copy_inputs, alloc_graph_output=not zero_copy_outputs
        )
    )


lower.last_report = None


def save(path: str | os.PathLike, *args: Any, **kwargs: Any) -> bytes:
    """:func:`lower`, then write the program to ``path``; returns the bytes too."""
    data = lower(*args, **kwargs)
    with open(path, "wb") as f:
        f.write(data)
    return data
