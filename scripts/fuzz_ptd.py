"""The mutated-``.ptd`` mode of scripts/fuzz_pte.py (``--ptd``): the seed programs saved with ``named_data="ptd"``,
each input the seed's own ``.pte`` with its ``.ptd`` mutated, loaded and run through :class:`et_tensorrt.Runner`.

Mutations: byte flips anywhere in the file (1-64), flips inside the engine and weight bytes only (1-8), a
truncation, two named data's bytes swapped (their common length), and another seed's ``.ptd``. Besides crashes
and code runs (scripts/fuzz_children.py), an input that *runs* although a byte the program reads changed (the
bytes under one of its keys differ from the seed's) is a finding: ``ran on changed named data``, which fails the
run. Flips that touch nothing the program reads (padding, an unused field) may run: ``ran, named data intact``.
"""

from __future__ import annotations

from pathlib import Path

# The delegate's own key-table reader (struct only: ExecuTorch's Python reader runs flatc in a subprocess, which the
# child's audit hook would count as code run by the file).
from et_tensorrt.format.pte_tables import ptd_layout

PTD_MUTATIONS = ("flip", "flip_data", "truncate", "swap_segments", "other_ptd")
SILENT = "ran on changed named data"


def build_ptd_seeds(directory: Path, models: str) -> dict[str, tuple[str, bytes]]:
    """name -> (its .pte path, its .ptd bytes): the seed models saved with named_data="ptd", once."""
    from fuzz_pte import _seed_models

    directory.mkdir(parents=True, exist_ok=True)
    out = {}
    wanted = models.split(",")
    for name, (model, inputs, dynamic) in _seed_models().items():
        if name not in wanted:
            continue
        pte, ptd = directory / f"{name}.pte", directory / f"{name}.ptd"
        if not (pte.exists() and ptd.exists()):
            import et_tensorrt

            et_tensorrt.save(pte, model, inputs, dynamic_shapes=dynamic, min_block_size=1, named_data="ptd")
        out[name] = (str(pte), ptd.read_bytes())
    return out


def _named(ptd: bytes) -> dict[str, bytes] | None:
    """key -> its bytes in a .ptd, None when the file does not parse as one."""
    try:
        return {key: ptd[start : start + size] for key, (start, size) in ptd_layout(ptd).items()}
    except Exception:  # noqa: BLE001 - a mutated flatbuffer raises anything (struct.error, IndexError, ...)
        return None


class PtdCorpus:
    """The seeds' programs and .ptd files, and where each one's named data lies."""

    def __init__(self, seeds: dict[str, tuple[str, bytes]]):
        self.names = sorted(seeds)
        self.pte = {n: seeds[n][0] for n in self.names}
        self.ptd = {n: seeds[n][1] for n in self.names}
        self.regions = {n: sorted(ptd_layout(self.ptd[n]).values()) for n in self.names}
        self.original = {n: _named(self.ptd[n]) for n in self.names}

    def mutate(self, seed: int, index: int) -> tuple[str, str, bytes]:
        """(seed program name, mutation kind, .ptd bytes) of input ``index`` of fuzz seed ``seed``."""
        from fuzz_pte import choose

        rng, name, kind = choose(seed, index, self.names, PTD_MUTATIONS)
        data = bytearray(self.ptd[name])
        regions = self.regions[name]
        if kind == "flip":
            for _ in range(rng.randint(1, 64)):
                data[rng.randrange(len(data))] ^= rng.randint(1, 255)
        elif kind == "flip_data":
            for _ in range(rng.randint(1, 8)):
                start, size = regions[rng.randrange(len(regions))]
                data[start + rng.randrange(size)] ^= rng.randint(1, 255)
        elif kind == "truncate":
            del data[rng.randrange(len(data)) :]
        elif kind == "swap_segments" and len(regions) > 1:
            (a, na), (b, nb) = rng.sample(regions, 2)
            n = min(na, nb)
            data[a : a + n], data[b : b + n] = data[b : b + n], data[a : a + n]
        elif kind == "other_ptd":
            donors = [n for n in self.names if n != name] or [name]
            data = bytearray(self.ptd[donors[rng.randrange(len(donors))]])
        return name, kind, bytes(data)

    def changed(self, name: str, data: bytes) -> bool:
        """Whether a byte the seed program reads (under one of its keys) differs in ``data``."""
        named = _named(data)
        if named is None:
            return True
        return any(named.get(key) != value for key, value in self.original[name].items())


def run_one_ptd(corpus: PtdCorpus, name: str, data: bytes, inputs, path: Path) -> str:
    """Load the seed's .pte with ``data`` as its .ptd and run it once; the outcome (a crash is not one)."""
    from fuzz_pte import run_one

    path.write_bytes(data)
    outcome = run_one(corpus.pte[name], inputs, data_path=path)
    if outcome != "ran":
        return outcome
    return SILENT if corpus.changed(name, data) else "ran, named data intact"
