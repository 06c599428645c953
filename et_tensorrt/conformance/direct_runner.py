"""Run backend-suite test functions through our flow *without* the suite runner's portable-only skip.

The suite's ``runner.run_test`` skips every subtest whose graph, looked at *before* delegation, holds
a rank-5 convolution (``_graph_has_unsupported_patterns``) or an op the portable kernels lack
(``UNSUPPORTED_PORTABLE_OPS``), even when the delegate took that node and the portable library would
never see it. Such subtests are reported "delegated, then skipped": lowered but never run.

``DirectRunner`` stands in for the suite's ``test_runner`` fixture object and takes the same stages
with the same comparison (export -> to_edge_transform_and_lower -> to_executorch -> serialize ->
run_method_and_compare_outputs with atol 1e-1, rtol 4e-2), so those subtests are really run and
compared with eager PyTorch. It changes nothing in the suite: it calls the suite's own test
functions, e.g. ``executorch.backends.test.suite.operators.test_conv3d.test_conv3d_basic(runner)``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from ..parity import SUITE
from .flow import ET_TENSORRT_TEST_FLOW


@dataclasses.dataclass
class DirectResult:
    """One ``lower_and_run_model`` call: whether anything was delegated and whether outputs matched."""

    subtest: int
    delegated: bool
    delegated_nodes: int
    undelegated_nodes: int


class DirectRunner:
    """The ``test_runner`` interface the suite's test functions use (``_flow``, ``lower_and_run_model``).

    Failures raise (lowering errors, run errors, ``AssertionError`` on an output mismatch); a
    subtest that delegates nothing raises too, since the point is to run the delegate.
    """

    def __init__(self, flow=ET_TENSORRT_TEST_FLOW, seed: int = 0):
        self._flow = flow
        self._seed = seed
        self.results: list[DirectResult] = []

    def lower_and_run_model(
        self,
        model: torch.nn.Module,
        inputs: Any,
        generate_random_test_inputs: bool = True,
        dynamic_shapes: Any | None = None,
    ) -> DirectResult:
        from executorch.backends.test.harness.stages import StageType

        torch.manual_seed(self._seed + len(self.results))
        tester = self._flow.tester_factory(model, inputs)
        tester.export(tester._get_default_stage(StageType.EXPORT, dynamic_shapes=dynamic_shapes))
        tester.to_edge_transform_and_lower()
        graph = tester.stages[tester.cur].graph_module.graph
        delegated = any(
            n.op == "call_function" and n.target == torch._higher_order_ops.executorch_call_delegate
            for n in graph.nodes
        )
        report = tester.partition_report()
        result = DirectResult(
            subtest=len(self.results),
            delegated=delegated,
            delegated_nodes=len(report.delegated) if report is not None else 0,
            undelegated_nodes=len(report.host_nodes) if report is not None else 0,
        )
        if not delegated:
            raise AssertionError(
                f"subtest {result.subtest}: nothing was delegated; "
                f"partition report:\n{report if report is not None else '(none)'}"
            )
        tester.to_executorch()
        tester.serialize()
        tester.run_method_and_compare_outputs(
            inputs=None if generate_random_test_inputs else inputs, atol=SUITE.atol, rtol=SUITE.rtol
        )
        self.results.append(result)
        return result
