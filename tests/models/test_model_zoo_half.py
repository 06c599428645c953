"""fp32 models of the zoo (scripts/bench_models.py) lowered with ``precision="fp16"``/``"bf16"``: one engine each,
within that precision's tolerance of fp32 eager. BERT (layer norms, GELU, a padded attention mask) is the non-LLM
model; HF Llama without a cache (one call on the whole sequence) shows the half-precision lowering is not about
state."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from et_tensorrt.parity import for_precision
from et_tensorrt.testing import Tester

ROOT = Path(__file__).resolve().parents[2]


def _zoo(row: str, monkeypatch):
    pytest.importorskip("transformers")
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))  # bench_models imports its folder's bench_common
    spec = importlib.util.spec_from_file_location("_bench_models_half", ROOT / "scripts" / "bench_models.py")
    bench = sys.modules.setdefault(spec.name, importlib.util.module_from_spec(spec))  # its dataclasses look it up
    spec.loader.exec_module(bench)
    return getattr(bench, f"_{row}")()


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
@pytest.mark.parametrize("row", ["bert", "llama"])
def test_fp32_zoo_model_in_half_precision_is_one_engine_within_tolerance(row, precision, monkeypatch):
    zoo = _zoo(row, monkeypatch)
    tester = Tester(zoo.model, zoo.inputs).lower(precision=precision).check_partitions(1).check_delegated_all()
    tester.run_runner().check_parity(tolerances=for_precision(precision))
