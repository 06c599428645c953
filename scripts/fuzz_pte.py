"""Fuzz whole ``.pte`` files through :class:`et_tensorrt.Runner`: no crash, no code from the file runs.

    python scripts/fuzz_pte.py --seed 0 --inputs 20000 [--artifacts DIR]

Seed programs are small models lowered with et_tensorrt (cached in ``$ARTIFACTS/seeds``). Each input is
one seed mutated by one of: byte flips (1-64 bytes anywhere, in the delegate blob only, or outside it),
a truncation, a chunk spliced in from another seed, or another seed's delegate blob swapped in (a
well-formed program whose delegate does not match its method). Every input is loaded with ``Runner``
(program verification at its default) and, when it loads, run once with the seed's inputs.

Inputs run in child processes, ``--batch`` at a time (scripts/fuzz_children.py): a child that dies
(signal, abort) or hangs is a *crash*; the parent saves the input (``crash-pte-<seed>-<index>.pte``),
counts it and carries on from the next input in a new child. Code from the file running is watched for
with an audit hook in the child and a canary directory that must stay empty. The outcome of every input
is counted by kind; the last line printed is the figures for the seed (docs/reliability.md,
docs/security.md). ``--no-verify`` loads with ``Runner(verify=False)`` to measure what the opt-out costs.
``--ptd``: the mutated-``.ptd`` mode (scripts/fuzz_ptd.py): the seeds saved with ``named_data="ptd"``, their
``.ptd`` mutated (flips, flips in the engine and weight bytes, truncations, swapped segments, another seed's); an
input that runs although a byte the program reads changed is a finding and fails the run. ``--ptd --head``: only the
``.ptd``'s head (its FlatTensor header and key table) is mutated; ``--through executorch`` loads and runs each input
through ExecuTorch's own ``executorch.runtime`` instead of ``Runner`` (issue 45: ExecuTorch reads that key table
unverified, and the delegate checks it before reading any named data).
"""

from __future__ import annotations

import sys
from pathlib import Path

from fuzz_seeds import SEED_MODELS, build_seeds, choose, run_one, seed_inputs

ROOT = Path(__file__).resolve().parent.parent
MUTATIONS = ("flip", "flip_blob", "flip_outside_blob", "truncate", "splice", "swap_blob")


def blob_regions(pte: bytes) -> list[tuple[int, int]]:
    """(offset, size) of each delegate payload inside the program bytes."""
    from executorch.exir._serialize._program import deserialize_pte_binary

    program = deserialize_pte_binary(pte).program
    regions = []
    for item in program.backend_delegate_data:
        payload = bytes(item.data)
        at = pte.find(payload)
        if at >= 0:
            regions.append((at, len(payload)))
    return regions


def swap_blob(pte: bytes, blob: bytes) -> bytes:
    """The same program with its first delegate's payload replaced (serialized by ExecuTorch)."""
    from executorch.exir._serialize._program import deserialize_pte_binary, serialize_pte_binary

    pte_file = deserialize_pte_binary(pte)
    pte_file.program.backend_delegate_data[0].data = blob
    return bytes(serialize_pte_binary(pte_file, extract_delegate_segments=True))


# -------------------------------------------------------------------------------------- mutations


class Corpus:
    """The seeds and what the mutations need of them (blob regions, swapped variants)."""

    def __init__(self, seeds: dict[str, bytes]):
        self.names = sorted(seeds)
        self.data = seeds
        self.regions = {n: blob_regions(d) for n, d in seeds.items()}
        self._swapped: dict[tuple[str, str], bytes] = {}

    def swapped(self, target: str, donor: str) -> bytes:
        key = (target, donor)
        if key not in self._swapped:
            start, size = self.regions[donor][0]
            self._swapped[key] = swap_blob(self.data[target], self.data[donor][start : start + size])
        return self._swapped[key]

    def mutate(self, seed: int, index: int) -> tuple[str, str, bytes]:
        """(seed program name, mutation kind, bytes) of input ``index`` of fuzz seed ``seed``."""
        rng, name, kind = choose(seed, index, self.names, MUTATIONS)
        data = bytearray(self.data[name])
        regions = self.regions[name]
        if kind == "flip" or (kind in ("flip_blob", "flip_outside_blob") and not regions):
            positions = [rng.randrange(len(data)) for _ in range(rng.randint(1, 64))]
        elif kind == "flip_blob":
            start, size = regions[rng.randrange(len(regions))]
            positions = [start + rng.randrange(size) for _ in range(rng.randint(1, 64))]
        elif kind == "flip_outside_blob":
            inside = {p for s, n in regions for p in range(s, s + n)}
            outside = [p for p in range(len(data)) if p not in inside] or list(range(len(data)))
            positions = [outside[rng.randrange(len(outside))] for _ in range(rng.randint(1, 64))]
        else:
            positions = []
        for p in positions:
            data[p] ^= rng.randint(1, 255)
        if kind == "truncate":
            del data[rng.randrange(len(data)) :]
        elif kind == "splice":
            donor = self.data[self.names[rng.randrange(len(self.names))]]
            length = rng.randint(1, 4096)
            src = rng.randrange(max(1, len(donor) - length))
            dst = rng.randrange(len(data))
            data[dst : dst + length] = donor[src : src + length]
        elif kind == "swap_blob":
            donor = self.names[rng.randrange(len(self.names))]
            data = bytearray(self.swapped(name, donor))
            for _ in range(rng.randint(0, 8)):  # and, sometimes, a few flips on top
                data[rng.randrange(len(data))] ^= rng.randint(1, 255)
        return name, kind, bytes(data)


# ---------------------------------------------------------------------------------------- child


def child(args) -> None:
    import logging
    import os

    from fuzz_children import child_loop

    logging.disable(logging.CRITICAL)  # the delegate logs one warning per PyTorch fallback
    if args.ptd:
        from fuzz_ptd import PtdCorpus, build_ptd_seeds, run_one_ptd

        ptd_corpus = PtdCorpus(build_ptd_seeds(Path(args.artifacts) / "seeds-ptd", args.models))
        work = Path(args.artifacts) / f"input-{args.seed}-{os.getpid()}.ptd"

        def one_ptd(index: int) -> list[str]:
            name, kind, data = ptd_corpus.mutate(args.seed, index, args.head)
            return [run_one_ptd(ptd_corpus, name, data, seed_inputs(name), work, args.through), f"mutation {kind}"]

        try:
            child_loop(args.start, args.stop, args.progress, args.result, args.canary, one_ptd)
        finally:
            work.unlink(missing_ok=True)
        return
    corpus = Corpus(build_seeds(Path(args.artifacts) / "seeds", args.models))
    inputs = {n: seed_inputs(n) for n in corpus.names}

    def one(index: int) -> list[str]:
        name, kind, data = corpus.mutate(args.seed, index)
        return [run_one(data, inputs[name], not args.no_verify), f"mutation {kind}"]

    child_loop(args.start, args.stop, args.progress, args.result, args.canary, one)


# --------------------------------------------------------------------------------------- parent


def fuzzer_name(args) -> str:
    """The fuzzer's name in its figures and crash files: pte, ptd, ptd-head; -no-verify, -executorch."""
    name = ("ptd-head" if args.head else "ptd") if args.ptd else "pte"
    return name + ("-no-verify" if args.no_verify else "") + ("-executorch" if args.through == "executorch" else "")


def parent(args) -> int:
    from fuzz_children import run_batches

    artifacts = Path(args.artifacts)
    if args.ptd:
        from fuzz_ptd import SILENT, PtdCorpus, build_ptd_seeds

        corpus = PtdCorpus(build_ptd_seeds(artifacts / "seeds-ptd", args.models))
        suffix = "ptd"
    else:
        corpus, suffix = Corpus(build_seeds(artifacts / "seeds", args.models)), "pte"
    name = fuzzer_name(args)

    def save_input(index: int, where: Path) -> str:
        seed_name, kind, data = (
            corpus.mutate(args.seed, index, args.head) if args.ptd else corpus.mutate(args.seed, index)
        )
        path = where / f"crash-{name}-{args.seed}-{index}.{suffix}"
        path.write_bytes(data)
        return f"{seed_name}, {kind}: {path}"

    extra = ["--models", args.models, "--through", args.through] + (["--no-verify"] if args.no_verify else [])
    extra += (["--ptd"] if args.ptd else []) + (["--head"] if args.head else [])
    rc, figures = run_batches(
        script=__file__,
        seed=args.seed,
        inputs=args.inputs,
        batch=args.batch,
        batch_timeout=args.batch_timeout,
        artifacts=artifacts,
        child_args=extra,
        save_input=save_input,
        figures_file=args.figures,
        name=name,
    )
    silent = figures["outcomes"].get(SILENT, 0) if args.ptd else 0
    if silent:
        print(f"SILENT RUNS: {silent} input(s) ran although a byte the program reads changed")
    return 1 if silent else rc


def main() -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from fuzz_children import fuzz_main, fuzz_parser

    p = fuzz_parser(
        __doc__,
        inputs=2000,
        batch=250,
        batch_timeout=120,
        models=",".join(SEED_MODELS),
        artifacts="/tmp/et_tensorrt_fuzz_pte",
    )
    p.add_argument("--no-verify", action="store_true", help="load with Runner(verify=False) (the opt-out)")
    p.add_argument("--ptd", action="store_true", help="mutate the seeds' .ptd (named_data='ptd'), not the .pte")
    p.add_argument("--head", action="store_true", help="with --ptd: mutate only its header and key table")
    p.add_argument(
        "--through",
        choices=("runner", "executorch"),
        default="runner",
        help="with --ptd: load and run through et_tensorrt.Runner or ExecuTorch's own executorch.runtime",
    )
    known = p.parse_known_args()[0]
    if (known.head or known.through != "runner") and not known.ptd:
        p.error("--head and --through are modes of --ptd")
    return fuzz_main(p, child, parent)


if __name__ == "__main__":
    sys.exit(main())
