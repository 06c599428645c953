"""Running the real command in a subprocess (the ``run_cli`` fixture), and reading what it printed."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Result:
    status: int
    stdout: str
    stderr: str

    @property
    def stderr_lines(self) -> list[str]:
        return self.stderr.splitlines()

    @property
    def noise(self) -> list[str]:
        """stderr lines other than notices: the backend's and the runtime's ("  [et_tensorrt] ...", e.g. "runs
        with PyTorch on cpu") and the command's own ("note: ...")."""
        return [line for line in self.stderr_lines if not line.startswith(("  [et_tensorrt] ", "note: "))]

    @property
    def imported(self) -> set[str]:
        """The modules the command imported, when it ran with ``PYTHONPROFILEIMPORTTIME=1`` (its ``import time:``
        lines on stderr)."""
        lines = [line for line in self.stderr_lines if line.startswith("import time:") and "|" in line]
        return {line.rsplit("|", 1)[1].strip() for line in lines}

    def imported_torch(self) -> list[str]:
        return sorted(m for m in self.imported if m == "torch" or m.startswith("torch."))

    @property
    def error_line(self) -> str:
        """The one line a failing command prints on stderr (nothing else may be there but notices)."""
        assert "Traceback" not in self.stderr, self.stderr
        assert len(self.noise) == 1, self.stderr
        (line,) = self.noise
        assert line.startswith("error: "), line
        return line


def _run(*args, cwd: Path, env: dict | None = None, timeout: int = 600) -> Result:
    """``python -m et_tensorrt ARGS`` in a fresh process, in ``cwd``, importing this checkout's et_tensorrt
    (the session's engine cache comes with the environment)."""
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    environment.pop("ET_TENSORRT_FALLBACK", None)
    environment.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-m", "et_tensorrt", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=environment,
        timeout=timeout,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture(scope="session")
def run_cli():
    """``run_cli(*args, cwd=..., env=...)`` -> Result."""
    return _run
