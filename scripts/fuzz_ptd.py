"""The mutated-``.ptd`` mode of scripts/fuzz_pte.py (``--ptd``): the seed programs saved with ``named_data="ptd"``,
each input the seed's own ``.pte`` with its ``.ptd`` mutated, loaded and run through :class:`et_tensorrt.Runner`, or
(``--through executorch``) through ExecuTorch's own ``executorch.runtime`` with the delegate registered.

Mutations: byte flips anywhere in the file (1-64), flips inside the engine and weight bytes only (1-8), a
truncation, two named data's bytes swapped (their common length), and another seed's ``.ptd``. ``--head``: the
file's head only, the FlatTensor header and the key table ExecuTorch reads unverified (issue 45): flips in the
header (1-4), flips in the key table (1-8), and one aligned 32-bit word of it (an offset, a length, a vtable entry)
set to an extreme. Besides crashes and code runs (scripts/fuzz_children.py), an input that *runs* although a byte
the program reads changed (the bytes under one of its keys differ from the seed's) is a finding: ``ran on changed
named data``, which fails the run. Flips that touch nothing the program reads (padding, an unused field) may run:
``ran, named data intact``.
"""

from __future__ import annotations

from pathlib import Path

from fuzz_seeds import choose, outcome, run_one, seed_models

# The delegate's own key-table reader (struct only: ExecuTorch's Python reader runs flatc in a subprocess, which the
# child's audit hook would count as code run by the file).
from et_tensorrt.format.pte_tables import ptd_layout

PTD_MUTATIONS = ("flip", "flip_data", "truncate", "swap_segments", "other_ptd")
HEAD_MUTATIONS = ("flip_header", "flip_key_table", "word_key_table")
SILENT = "ran on changed named data"
HEADER_BYTES = 48  # the FlatTensor header: root offset, "FT01", "FH01", length, key table and segment offsets/sizes
EXTREME_WORDS = (0, 1, 2, 4, 8, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0xFFFF)


def build_ptd_seeds(directory: Path, models: str) -> dict[str, tuple[str, bytes]]:
    """name -> (its .pte path, its .ptd bytes): the seed models saved with named_data="ptd", once."""
    directory.mkdir(parents=True, exist_ok=True)
    out = {}
    wanted = models.split(",")
    for name, (model, inputs, dynamic) in seed_models().items():
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

    def mutate(self, seed: int, index: int, head: bool = False) -> tuple[str, str, bytes]:
        """(seed program name, mutation kind, .ptd bytes) of input ``index`` of fuzz seed ``seed``; ``head``: the
        header and key table only."""
        rng, name, kind = choose(seed, index, self.names, HEAD_MUTATIONS if head else PTD_MUTATIONS)
        data = bytearray(self.ptd[name])
        if head:
            return name, kind, bytes(_mutate_head(rng, kind, data))
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


def _mutate_head(rng, kind: str, data: bytearray) -> bytearray:
    """``data`` with its head mutated: the header, or the key table (the flatbuffer the header says ends at
    flatbuffer_offset + flatbuffer_size)."""
    table_end = min(len(data), int.from_bytes(data[16:24], "little") + int.from_bytes(data[24:32], "little"))
    if kind == "flip_header":
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(HEADER_BYTES)] ^= rng.randint(1, 255)
    elif kind == "flip_key_table":
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(HEADER_BYTES, table_end)] ^= rng.randint(1, 255)
    else:  # word_key_table
        at = rng.randrange(HEADER_BYTES // 4, table_end // 4) * 4
        word = rng.choice(EXTREME_WORDS + (len(data), table_end, rng.randrange(1 << 32)))
        data[at : at + 4] = (word & 0xFFFFFFFF).to_bytes(4, "little")
    return data


def run_one_executorch(pte: str, inputs, data_path) -> str:
    """Load and run one program through ExecuTorch's own ``executorch.runtime`` (the delegate registered by importing
    et_tensorrt); its outcome."""
    from executorch.runtime import Runtime

    import et_tensorrt  # noqa: F401 - registers the backend into ExecuTorch's registry

    def load():  # the program is kept beside its method: the method runs in the program's memory
        program = Runtime.get().load_program(pte, data_path=str(data_path))
        return program, program.load_method("forward")

    return outcome(load, lambda loaded: loaded[1].execute(list(inputs)))


def run_one_ptd(corpus: PtdCorpus, name: str, data: bytes, inputs, path: Path, through: str = "runner") -> str:
    """Load the seed's .pte with ``data`` as its .ptd (through ``Runner`` or ``executorch``) and run it once; the
    outcome (a crash is not one)."""
    path.write_bytes(data)
    if through == "executorch":
        outcome = run_one_executorch(corpus.pte[name], inputs, path)
    else:
        outcome = run_one(corpus.pte[name], inputs, data_path=path)
    if outcome != "ran":
        return outcome
    return SILENT if corpus.changed(name, data) else "ran, named data intact"
