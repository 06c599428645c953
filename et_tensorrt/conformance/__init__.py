"""Conformance of the et_tensorrt delegate against ExecuTorch's backend test suite.

* the suite's tester is :class:`et_tensorrt.testing.Tester` (lowers through ``TensorRTPartitioner``);
* :mod:`.flow` - the ``et_tensorrt`` ``TestFlow`` (``min_block_size=1``);
* :mod:`.pytest_plugin` - ``-p et_tensorrt.conformance.pytest_plugin`` adds the flow to the suite.

``scripts/backend_suite.sh`` runs the suite for our flow and XNNPACK; ``scripts/summarize_suite.py``
prints the comparison table (docs/conformance.md).
"""

from .flow import ET_TENSORRT_TEST_FLOW, FLOW_NAME, make_flow

__all__ = ["ET_TENSORRT_TEST_FLOW", "FLOW_NAME", "make_flow"]
