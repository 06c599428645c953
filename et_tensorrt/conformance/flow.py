"""The ``et_tensorrt`` flow for ExecuTorch's backend test suite (``executorch.backends.test.suite``).

The suite's operator tests are single-op graphs, so the flow lowers with ``min_block_size=1``
(the partitioner's default of 5 would leave every one of them on the host and measure nothing).
Everything else is the partitioner's default: engine device ``cuda:0``, fp32, no user exclusions.

On a machine without a GPU the suite runs each delegate through the PyTorch program embedded in its
blob, so it checks partitioning, lowering, the blob and the runtime, not the engine's numbers. The
``et_tensorrt_onnx_checked`` flow adds what can be checked there: every partition's ONNX (the engine's
source) is run by onnxruntime and compared with PyTorch at lowering time (``et_tensorrt.validate``); a
mismatch fails the subtest.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from executorch.backends.test.suite.flow import TestFlow

from ..compile_specs import BuildOptions

FLOW_NAME = "et_tensorrt"
ONNX_CHECKED_FLOW_NAME = "et_tensorrt_onnx_checked"
BACKEND_NAME = "et_tensorrt"

# What the conformance flow hands every TensorRTPartitioner it creates.
FLOW_PARTITIONER_OPTIONS: Mapping[str, Any] = {"min_block_size": 1}


def make_tester(module, example_inputs, dynamic_shapes=None, **options):
    """``TestFlow.tester_factory``: the suite calls it as ``factory(model, inputs)``.

    The one :class:`et_tensorrt.testing.Tester`, as every suite flow builds its tester: strict export and the
    harness's edge config (IR validity not checked); ``options`` are :func:`et_tensorrt.lower`'s (default:
    the flow's partitioner options), zero-copy inputs as ``lower`` plans them.
    """
    from executorch.exir import EdgeCompileConfig

    from ..testing.tester import Tester  # imports et_tensorrt (and its native module) on first use only

    options = options or dict(FLOW_PARTITIONER_OPTIONS)
    return Tester(
        module,
        example_inputs,
        dynamic_shapes,
        edge_compile_config=EdgeCompileConfig(_check_ir_validity=False),
        strict_export=True,
        **options,
    )


def make_flow(
    name: str = FLOW_NAME,
    partitioner_options: Mapping[str, Any] | None = None,
    build_options: BuildOptions | None = None,
    **flow_kwargs: Any,
) -> TestFlow:
    """A ``TestFlow`` for our delegate; ``partitioner_options`` replace the flow defaults, ``build_options``
    become the partitioners' compile specs (a ``compile_specs`` entry among ``partitioner_options`` is read as
    build options too)."""
    options = dict(FLOW_PARTITIONER_OPTIONS if partitioner_options is None else partitioner_options)
    specs = options.pop("compile_specs", None)
    if specs:
        build_options = BuildOptions.from_specs({**specs, **(build_options.to_specs() if build_options else {})})
    if build_options is not None:
        options["build_options"] = build_options
    return TestFlow(
        name=name,
        backend=BACKEND_NAME,
        tester_factory=functools.partial(make_tester, **options),
        is_delegated=True,
        **flow_kwargs,
    )


ET_TENSORRT_TEST_FLOW = make_flow()
ET_TENSORRT_ONNX_CHECKED_FLOW = make_flow(ONNX_CHECKED_FLOW_NAME, build_options=BuildOptions(validate=True))
ET_TENSORRT_FLOWS = (ET_TENSORRT_TEST_FLOW, ET_TENSORRT_ONNX_CHECKED_FLOW)
