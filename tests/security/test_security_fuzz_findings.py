"""Files the fuzzers found crashing the process, kept as regression inputs (docs/security.md, reliability.md).

Each runs in a child process: a regression is then a failed test, not a dead test run."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

DATA = Path(__file__).parent / "data"

LOAD_AND_RUN = textwrap.dedent(
    """
    import sys, torch, et_tensorrt
    try:
        et_tensorrt.Runner(sys.argv[1]).run([torch.randn(2, 8)])
    except et_tensorrt.RunnerError as e:
        print("REFUSED:", e)
    """
)


def _load_and_run(path: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    return subprocess.run(
        [sys.executable, "-c", LOAD_AND_RUN, str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


def test_f9_an_input_index_outside_the_values_is_refused_not_an_abort():
    """pte fuzzer, seed 2, input 917: one flipped byte outside the delegate blob makes the plan's input 0 point
    at value -1509949440; ExecuTorch's verifier accepts it and Method::set_input aborts on it."""
    result = _load_and_run(DATA / "f9_input_index_out_of_range.pte")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "REFUSED: cannot load method 'forward': its input 0 refers to a value the program does not have" in (
        result.stdout
    )
