"""Pytest plugin that adds our flows (``et_tensorrt``, ``et_tensorrt_onnx_checked``) to ExecuTorch's backend
test suite.

The suite's ``conftest.py`` reads ``executorch.backends.test.suite.flow.all_flows()`` (a hard-coded
dict) when it is imported, to declare the ``flow_<name>``/``backend_<name>`` markers and the
``test_runner`` fixture's parameters. A plugin is imported before any conftest, so replacing
``all_flows`` here is enough::

    python -m pytest -c /dev/null --rootdir=<site-packages>/executorch/backends/test/suite \\
        <suite>/operators/test_add.py -p et_tensorrt.conformance.pytest_plugin -m flow_et_tensorrt

Idempotent: loading it twice (``-p`` plus ``PYTEST_PLUGINS``) still adds each flow once.
"""

from __future__ import annotations

import executorch.backends.test.suite.flow as _suite_flow

from .flow import ET_TENSORRT_FLOWS


def _install() -> None:
    original = _suite_flow.all_flows
    if getattr(original, "_et_tensorrt_wrapped", False):
        return

    def all_flows():
        flows = dict(original())
        flows.update({flow.name: flow for flow in ET_TENSORRT_FLOWS})
        return flows

    all_flows._et_tensorrt_wrapped = True  # type: ignore[attr-defined]
    all_flows.__wrapped__ = original  # type: ignore[attr-defined]
    _suite_flow.all_flows = all_flows


_install()
