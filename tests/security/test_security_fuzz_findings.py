"""What the fuzzers found crashing the process, rebuilt here as regression inputs (docs/security.md).

Each file is made from a fresh lowering and runs in a child process: a regression is then a failed test, not a
dead test run."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import torch
from models import MLP

from et_tensorrt.testing import Tester

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


def test_f9_an_input_index_outside_the_values_is_refused_not_an_abort(tmp_path):
    """pte fuzzer, seed 2, input 917: one flipped byte outside the delegate blob made the plan's input 0 point
    at value -1509949440; ExecuTorch's verifier accepts it and Method::set_input aborts on it."""
    from executorch.exir._serialize._program import deserialize_pte_binary, serialize_pte_binary

    pte = Tester(MLP(), (torch.randn(2, 8),)).lower(min_block_size=1).pte
    program_file = deserialize_pte_binary(pte)
    program_file.program.execution_plan[0].inputs[0] = -1509949440  # the value index the fuzzer's flip made
    path = tmp_path / "f9.pte"
    path.write_bytes(bytes(serialize_pte_binary(program_file)))
    result = _load_and_run(path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "REFUSED: cannot load method 'forward': its input 0 refers to a value the program does not have" in (
        result.stdout
    )
