"""CI slice of scripts/bench_models.py (the model zoo): a tiny GPT-2 decoder (eager attention) through
et_tensorrt and XNNPACK in one run. GPT-2 holds most of what real models needed: index.Tensor, bool
bitwise ops, cumsum, an embedding fed through a view (validated with ids in range) and a -inf mask.

It must lower to one partition with every compute node delegated, the ONNX of that partition checked by
onnxruntime with a finite error, explain() on the torch.export program must predict lower's partitions,
and the program must match eager. The full zoo and its table: docs/benchmarks.md."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    pytest.importorskip("transformers")
    out = tmp_path_factory.mktemp("zoo") / "zoo.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "bench_models.py"),
            "--rows",
            "gpt2",
            "--static-only",
            "--json",
            str(out),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert out.exists(), proc.stderr[-3000:]
    results = {r["backend"]: r for r in json.loads(out.read_text())["results"]}
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-3000:])
    return results, proc.stdout


def test_gpt2_is_one_engine_validated_and_predicted_by_explain(zoo):
    results, _ = zoo
    ours = results["et_tensorrt"]
    assert ours["error"] == ""
    assert ours["partitions"] == 1 and ours["host"] == {}
    assert ours["delegated"] == ours["compute"] > 100
    assert ours["explain_agrees"] is True
    assert ours["onnx_err"] is not None and math.isfinite(ours["onnx_err"]) and ours["onnx_err"] < 1e-4
    assert ours["engine_mb"] > 0 and ours["pte_mb"] > ours["engine_mb"]
    assert ours["max_err"] <= 1e-5 * max(1.0, ours["out_scale"])


def test_xnnpack_runs_side_by_side_and_the_table_has_both_rows(zoo):
    results, table = zoo
    xnnpack = results["xnnpack"]
    assert xnnpack["error"] == "" and xnnpack["partitions"] >= 1
    assert xnnpack["max_err"] <= 1e-4 * max(1.0, xnnpack["out_scale"])
    rows = [line for line in table.splitlines() if line.startswith("| gpt2 ")]
    assert [row.split("|")[3].strip() for row in rows] == ["et_tensorrt", "xnnpack"]
