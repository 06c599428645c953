"""What the whole-file fuzzers share (scripts/fuzz_pte.py and its ``--ptd`` mode, scripts/fuzz_ptd.py;
scripts/fuzz_program.py): the seed models and their lowered programs, the choice of an input's seed and mutation, and
loading and running one input through :class:`et_tensorrt.Runner`. One module both import, so that neither imports
the other (tests/test_import_layers.py checks scripts/ for import circles too).
"""

from __future__ import annotations

import random
from pathlib import Path

SEED_MODELS = ("mlp", "conv", "dynamic")


# ------------------------------------------------------------------------------------------ seeds


def seed_models():
    import torch

    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
    conv = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3, padding=1),
        torch.nn.BatchNorm2d(4),
        torch.nn.ReLU(),
        torch.nn.Flatten(),
        torch.nn.Linear(4 * 6 * 6, 5),
    ).eval()
    batch = torch.export.Dim("batch", min=2, max=16)
    return {
        "mlp": (mlp, (torch.randn(2, 8),), None),
        "conv": (conv, (torch.randn(1, 3, 6, 6),), None),
        "dynamic": (mlp, (torch.randn(4, 8),), {"input": {0: batch}}),
    }


def seed_inputs(name: str) -> tuple:
    return seed_models()[name][1]


def build_seeds(directory: Path, models: str = ",".join(SEED_MODELS)) -> dict[str, bytes]:
    """Lowered seed programs, built once and cached under ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    out = {}
    wanted = models.split(",")
    for name, (model, inputs, dynamic) in seed_models().items():
        if name not in wanted:
            continue
        path = directory / f"{name}.pte"
        if not path.exists():
            import et_tensorrt

            data = et_tensorrt.lower(model, inputs, dynamic_shapes=dynamic, min_block_size=1)
            path.write_bytes(data)
        out[name] = path.read_bytes()
    return out


# -------------------------------------------------------------------------------------- mutations


def choose(seed: int, index: int, names: list[str], kinds: tuple[str, ...]) -> tuple[random.Random, str, str]:
    """(the input's random source, its seed program, its mutation kind): input ``index`` of fuzz seed ``seed``, the
    same in the child that runs it and the parent that saves it."""
    rng = random.Random(seed * 1_000_003 + index)
    return rng, names[index % len(names)], kinds[rng.randrange(len(kinds))]


# ---------------------------------------------------------------------------------------- running


def outcome(load, run) -> str:
    """``run(load())``'s outcome: "ran", or which of the two refused, by exception type (an exception is an outcome,
    a crash is not)."""
    try:
        loaded = load()
    except Exception as e:  # noqa: BLE001 - every refusal is counted, by type
        return f"load refused: {type(e).__name__}"
    try:
        run(loaded)
    except Exception as e:  # noqa: BLE001
        return f"run refused: {type(e).__name__}"
    return "ran"


def run_one(data, inputs, verify: bool = True, data_path=None) -> str:
    """Load and run one program (bytes or a path; ``data_path``: its .ptd) through ``Runner``; its outcome."""
    import et_tensorrt

    return outcome(
        lambda: et_tensorrt.Runner(data, verify=verify, data_path=data_path), lambda runner: runner.run(list(inputs))
    )
