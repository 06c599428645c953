"""CI slice of ExecuTorch's backend test suite through the et_tensorrt_onnx_checked flow.

Runs a fixed, representative slice of the suite's operator tests (elementwise binary with
broadcasting, an activation, 2-D convolution, a mean of int64 as float32) from the installed
executorch wheel, in a subprocess, through ``-p et_tensorrt.conformance.pytest_plugin
-m flow_et_tensorrt_onnx_checked`` - the same path ``scripts/backend_suite.sh`` takes; that flow also
runs each partition's ONNX (the engine's source) with onnxruntime against PyTorch, the check of the
engine's numbers that a machine without a GPU allows - and checks the JSON report: no failed test or
subtest, no subtest that delegates and is then skipped, and at least ``MIN_DELEGATED_PASSES``
delegated passes.

Needs pytest-json-report (test extra). Without it this test FAILS rather than skips: a silently
skipped conformance check is worse than none.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

from et_tensorrt.conformance.flow import ONNX_CHECKED_FLOW_NAME as FLOW

# Files (or node ids) under <suite>/operators/. Kept small: lowering costs ~2-7 s per subtest.
SLICE = (
    "test_add.py",
    "test_relu.py",
    "test_conv2d.py::test_conv2d_basic",
    "test_conv2d.py::test_conv2d_no_bias",
    "test_mean.py::test_mean_output_dtype",  # its float64 subtests stay on the host
)
# Delegated, passing subtests the slice produces today (add 5, relu 3, conv2d 2, mean 1).
MIN_DELEGATED_PASSES = 11
TIMEOUT_S = 600


def _suite_root() -> str:
    import executorch

    return os.path.join(executorch.__path__[0], "backends", "test", "suite")


def test_backend_suite_slice(tmp_path):
    if importlib.util.find_spec("pytest_jsonreport") is None:
        pytest.fail(
            "pytest-json-report is not installed; the conformance slice needs it "
            "(add pytest-json-report, pytest-xdist, pytest-timeout to the 'test' extra)"
        )
    suite = _suite_root()
    assert os.path.isdir(os.path.join(suite, "operators")), f"no backend test suite at {suite}"
    report_path = tmp_path / "slice.json"
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-c",
        os.devnull,
        f"--rootdir={suite}",
        *(os.path.join(suite, "operators", item) for item in SLICE),
        "-p",
        "et_tensorrt.conformance.pytest_plugin",
        "-m",
        f"flow_{FLOW}",
        "-p",
        "no:cacheprovider",
        "-q",
        "--tb=native",
        "--json-report",
        f"--json-report-file={report_path}",
    ]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS")}
    env["ET_TENSORRT_CACHE_DIR"] = str(tmp_path / "engines")  # really build the engines
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    tail = (proc.stdout + proc.stderr)[-4000:]
    assert report_path.exists(), f"no JSON report (exit {proc.returncode}):\n{tail}"

    spec = importlib.util.spec_from_file_location(
        "summarize_suite", os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "summarize_suite.py")
    )
    summarize_suite = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("summarize_suite", summarize_suite)  # dataclasses look their module up by name
    spec.loader.exec_module(summarize_suite)
    row = summarize_suite.summarize(str(report_path))

    assert row.flow == FLOW, row.flow
    assert row.tests > 0, f"the slice collected no {FLOW} tests:\n{tail}"
    assert row.failed == 0 and not row.failures, (
        f"{row.failed} failed test(s):\n{summarize_suite.details([row])}\n{tail}"
    )
    assert row.delegated_skip == 0, summarize_suite.details([row])
    assert row.delegated_pass >= MIN_DELEGATED_PASSES, (
        f"only {row.delegated_pass} delegated passes (< {MIN_DELEGATED_PASSES}):\n{summarize_suite.table([row])}"
    )
    assert proc.returncode == 0, tail
