"""Small runs of the two fuzzers scripts/fuzz.sh runs at scale: whole mutated .pte files through Runner
(scripts/fuzz_pte.py) and hostile programs through the loader (scripts/fuzz_program.py). Each runs in
child processes; the test fails on any crash, hang, code run or (loader) error other than a refusal."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")  # seeds are lowered once and shared by both runs


def _fuzz(script: str, artifacts: Path, *args: str) -> dict:
    proc = subprocess.run(
        [sys.executable, str(SCRIPTS / script), "--artifacts", str(artifacts), *args],
        capture_output=True,
        text=True,
        timeout=1500,
    )
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert figures["crashes"] == figures["hangs"] == figures["code_runs"] == 0, figures
    return figures


def test_mutated_pte_files_through_the_runner(artifacts):
    figures = _fuzz("fuzz_pte.py", artifacts, "--seed", "11", "--inputs", "60", "--batch", "60", "--models", "mlp")
    outcomes = figures["outcomes"]
    assert sum(v for k, v in outcomes.items() if not k.startswith("mutation")) == 60
    assert any(k.startswith("load refused") for k in outcomes), outcomes  # the verifier is exercised


def test_mutated_ptd_files_through_the_runner(artifacts):
    """Every mutation of a .ptd that changes a byte the program reads is refused; none runs (the script fails on a
    silent run, and so does this test)."""
    figures = _fuzz(
        "fuzz_pte.py", artifacts, "--ptd", "--seed", "11", "--inputs", "60", "--batch", "60", "--models", "mlp"
    )
    outcomes = figures["outcomes"]
    assert sum(v for k, v in outcomes.items() if not k.startswith("mutation")) == 60
    assert "ran on changed named data" not in outcomes, outcomes
    assert outcomes.get("load refused: RunnerError", 0) + outcomes.get("run refused: RunnerError", 0) > 30, outcomes
    assert outcomes.get("mutation flip_data", 0) > 0 and outcomes.get("mutation swap_segments", 0) > 0, outcomes


def test_damaged_ptd_heads_through_executorchs_own_runtime(artifacts):
    """The .ptd's header and key table mutated, each input loaded and run through executorch.runtime (issue 45: 13 of
    200 crashed ExecuTorch's FlatTensorDataMap before the delegate checked the key table at init)."""
    figures = _fuzz(
        "fuzz_pte.py", artifacts, "--ptd", "--head", "--through", "executorch", "--seed", "11", "--inputs", "40",
        "--batch", "40", "--models", "mlp",
    )  # fmt: skip
    outcomes = figures["outcomes"]
    assert sum(v for k, v in outcomes.items() if not k.startswith("mutation")) == 40
    assert "ran on changed named data" not in outcomes, outcomes
    assert outcomes.get("mutation flip_key_table", 0) > 0 and outcomes.get("mutation word_key_table", 0) > 0, outcomes


def test_hostile_programs_through_the_loader(artifacts):
    figures = _fuzz(
        "fuzz_program.py", artifacts, "--seed", "11", "--inputs", "150", "--batch", "150", "--models", "mlp"
    )
    outcomes = figures["outcomes"]
    assert not any(k.startswith("VIOLATION") for k in outcomes), outcomes
    assert outcomes.get("program refused", 0) > 50 and outcomes.get("loaded, ran", 0) > 0, outcomes
