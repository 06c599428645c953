"""A ``Tester`` for ExecuTorch's backend test harness that lowers through ``TensorRTPartitioner``.

ExecuTorch's harness (``executorch.backends.test.harness``) drives a model through stages
(export -> to_edge_transform_and_lower -> to_executorch -> serialize -> run and compare). A backend
supplies its own Partition / ToEdgeTransformAndLower stages; this module supplies ours, built the
same way :func:`et_tensorrt.lower` builds a program:

* partitioner: ``TensorRTPartitioner(**partitioner_options)`` (default target ``cuda:0``; the
  conformance flow passes ``min_block_size=1`` because the suite measures single-op graphs);
* edge config: the harness default (``_check_ir_validity=False``), as every suite flow uses;
* ``to_executorch``: the harness config (delegate segments extracted, constraint-based symbolic
  shapes) plus :func:`et_tensorrt.lower`'s ``alloc_graph_input=False`` memory plan, so the suite
  exercises the zero-copy input path our users get.

Importing this module imports ``et_tensorrt`` (registers the runtime backend with ExecuTorch) and
``et_tensorrt.backend`` (ExecuTorch finds ``EtTensorRTBackend.preprocess`` by class name).
"""

from __future__ import annotations

import functools
from typing import Any, Dict, List, Mapping, Optional, Tuple

import torch

import et_tensorrt  # noqa: F401  (registers EtTensorRTBackend with ExecuTorch's runtime)
import executorch.backends.test.harness.stages as BaseStages
from et_tensorrt.backend import EtTensorRTBackend  # noqa: F401  (preprocess found by class name)
from et_tensorrt.partition import TensorRTPartitioner
from executorch.backends.test.harness import Tester as TesterBase
from executorch.backends.test.harness.stages import StageType
from executorch.exir import EdgeCompileConfig, ExecutorchBackendConfig
from executorch.exir.backend.partitioner import Partitioner
from executorch.exir.passes import MemoryPlanningPass
from executorch.exir.passes.sym_shape_eval_pass import ConstraintBasedSymShapeEvalPass

__all__ = [
    "Partition",
    "Tester",
    "ToEdgeTransformAndLower",
    "ToExecutorch",
    "make_partitioner",
]


def make_partitioner(options: Optional[Mapping[str, Any]] = None) -> TensorRTPartitioner:
    """A fresh partitioner (one per stage: the partitioner keeps its last report)."""
    return TensorRTPartitioner(**dict(options or {}))


def _edge_config() -> EdgeCompileConfig:
    return EdgeCompileConfig(_check_ir_validity=False)


class ToEdgeTransformAndLower(BaseStages.ToEdgeTransformAndLower):
    """``to_edge_transform_and_lower`` with a ``TensorRTPartitioner``.

    The base stage keeps ``partitioners`` only when ``default_partitioner_cls`` is also given
    (``partitioners or [default()] if default is not None else []``), so both are always passed.
    """

    def __init__(
        self,
        partitioners: Optional[List[Partitioner]] = None,
        edge_compile_config: Optional[EdgeCompileConfig] = None,
        partitioner_options: Optional[Mapping[str, Any]] = None,
    ):
        super().__init__(
            default_partitioner_cls=functools.partial(make_partitioner, partitioner_options),
            partitioners=partitioners,
            edge_compile_config=edge_compile_config or _edge_config(),
        )


class Partition(BaseStages.Partition):
    """``EdgeProgramManager.to_backend`` with a ``TensorRTPartitioner`` (the to_edge + partition path)."""

    def __init__(
        self,
        partitioner: Optional[Partitioner] = None,
        partitioner_options: Optional[Mapping[str, Any]] = None,
    ):
        super().__init__(partitioner=partitioner or make_partitioner(partitioner_options))


class ToEdge(BaseStages.ToEdge):
    def __init__(self, edge_compile_config: Optional[EdgeCompileConfig] = None):
        super().__init__(edge_compile_config or _edge_config())


class ToExecutorch(BaseStages.ToExecutorch):
    """The harness's ``to_executorch`` config with :func:`et_tensorrt.lower`'s memory plan."""

    def __init__(
        self,
        config: Optional[ExecutorchBackendConfig] = None,
        zero_copy_inputs: bool = True,
    ):
        super().__init__(
            config
            or ExecutorchBackendConfig(
                extract_delegate_segments=True,
                sym_shape_eval_pass=ConstraintBasedSymShapeEvalPass(),
                memory_planning_pass=MemoryPlanningPass(alloc_graph_input=not zero_copy_inputs),
            )
        )


class Tester(TesterBase):
    """ExecuTorch harness ``Tester`` whose lowering stages delegate to ``EtTensorRTBackend``.

    ``partitioner_options`` go to every default ``TensorRTPartitioner`` this tester creates
    (``target_device``, ``min_block_size``, ``torch_executed_ops``, ``require_full_compilation``,
    ``compile_specs``); ``zero_copy_inputs`` picks the ``to_executorch`` memory plan.
    """

    __test__ = False

    def __init__(
        self,
        module: torch.nn.Module,
        example_inputs: Tuple[Any, ...],
        dynamic_shapes: Optional[Tuple[Any, ...]] = None,
        *,
        partitioner_options: Optional[Mapping[str, Any]] = None,
        zero_copy_inputs: bool = True,
        **kwargs: Any,
    ):
        options = dict(partitioner_options or {})
        self.partitioner_options = options
        stage_classes: Dict[StageType, Any] = TesterBase.default_stage_classes() | {
            StageType.PARTITION: functools.partial(Partition, partitioner_options=options),
            StageType.TO_EDGE: ToEdge,
            StageType.TO_EDGE_TRANSFORM_AND_LOWER: functools.partial(
                ToEdgeTransformAndLower, partitioner_options=options
            ),
            StageType.TO_EXECUTORCH: functools.partial(
                ToExecutorch, zero_copy_inputs=zero_copy_inputs
            ),
        }
        super().__init__(
            module=module,
            stage_classes=stage_classes,
            example_inputs=example_inputs,
            dynamic_shapes=dynamic_shapes,
            **kwargs,
        )

    def partition_report(self):
        """The ``PartitionReport`` of the last lowering stage that ran, or None."""
        for stage_type in (StageType.TO_EDGE_TRANSFORM_AND_LOWER, StageType.PARTITION):
            stage = self.stages.get(stage_type)
            if stage is None:
                continue
            parts = getattr(stage, "partitioners", None) or [getattr(stage, "partitioner", None)]
            for p in parts:
                if isinstance(p, TensorRTPartitioner) and p.report is not None:
                    return p.report
        return None
