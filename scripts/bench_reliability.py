"""Issue 45's faults, each row run as written on tiny HF Llama programs, and a table of what happened:

  1 et_tensorrt.save onto a disk that fills up     2 the saving process SIGKILLed in the middle of the write
  3 the engine cache on a full disk                4 a read-only engine cache holding a valid entry
  7 generation that cannot go on (full context, prompt past the cache, empty prompt): what each front door says
  8 positions and tokens of different lengths      9 a token id past the vocabulary; an error about decode's input 1

Disks: a 1 MiB tmpfs and a read-only bind mount where this process may mount them (root), else the same faults
injected (et_tensorrt.testing.faults: ENOSPC once 1 MiB is written, EROFS on every new name). Rows 5, 6 and 10
(load/reset memory, .ptd heads through executorch.runtime, per-call cost) are another benchmark's: add a function
to ``ROWS`` and it runs here too. Each row says what happened and whether that is the outcome issue 45 asks for.

    python scripts/bench_reliability.py [--rows 1,2,3,4,7,8,9] [--json out.json]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

CONTEXT = 64  # positions of the programs' KV cache (the issue's "64-position cache")


@dataclass
class Outcome:
    what: str  # what happened, one line
    ok: bool  # the outcome issue 45 asks for
    figures: dict = field(default_factory=dict)


# --------------------------------------------------------------------------------------------- disks


@contextlib.contextmanager
def small_disk(size: int = 1 << 20) -> Iterator[tuple[Path, str]]:
    """(folder, how): a ``size``-byte tmpfs where mounting works, else a folder with ENOSPC injected past ``size``."""
    from et_tensorrt.testing import faults

    with faults.tmpfs(size) as mounted:
        if mounted is not None:
            yield mounted, f"a {size >> 20} MiB tmpfs"
            return
    folder = Path(tempfile.mkdtemp(prefix="et-small-disk-"))
    try:
        with faults.full_disk(folder, size):
            yield folder, f"ENOSPC injected after {size >> 20} MiB"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def read_only(source: Path) -> Iterator[tuple[Path, str]]:
    """(folder, how): ``source``'s files behind a read-only bind mount, else with EROFS injected on it."""
    from et_tensorrt.testing import faults

    with faults.read_only_mount(source) as mounted:
        if mounted is not None:
            yield mounted, "a read-only bind mount"
            return
    with faults.read_only(source):
        yield source, "EROFS injected"


# ------------------------------------------------------------------------------------------ programs


class Programs:
    """Tiny HF Llamas (random weights, nothing downloaded), made once in ``folder``: a byte-level tokenizer,
    ``two``: prefill + decode methods with the LLM constant methods (export_prefill_decode), ``forward``: one method
    taking 1..63 tokens and their positions."""

    def __init__(self, folder: Path):
        self.folder = folder
        self._made: dict[str, Path] = {}

    def model(self, vocab: int | None = None, hidden: int = 64, layers: int = 2):
        import torch
        from transformers import LlamaConfig, LlamaForCausalLM

        torch.manual_seed(0)
        config = LlamaConfig(
            vocab_size=vocab or self.vocab, hidden_size=hidden, intermediate_size=2 * hidden,
            num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=CONTEXT,
        )  # fmt: skip
        return LlamaForCausalLM(config).eval()

    @property
    def tokenizer(self) -> Path:
        from et_tensorrt.testing import decoders

        path = self.folder / "tokenizer.json"
        if not path.exists():
            self.vocab = decoders.byte_level_tokenizer(path)
        return path

    def methods(self) -> dict:
        from et_tensorrt.llm import llm_methods

        _ = self.tokenizer
        return llm_methods(max_seq_len=CONTEXT, vocab_size=self.vocab, bos_id=0, eos_ids=[1])

    def exported(self, name: str):
        """``two``: {"prefill", "decode"}; ``forward``: the prefill method alone (1..63 tokens and their positions)."""
        from et_tensorrt.llm import export_prefill_decode

        _ = self.tokenizer
        methods = export_prefill_decode(self.model())
        return methods if name == "two" else methods["prefill"]

    def path(self, name: str) -> Path:
        if name not in self._made:
            import et_tensorrt

            path = self.folder / f"{name}.pte"
            et_tensorrt.save(path, self.exported(name), constant_methods=self.methods())
            self._made[name] = path
        return self._made[name]


def _child_env() -> dict:
    """The environment for a child process: it imports the et_tensorrt this process imported."""
    import et_tensorrt

    root = str(Path(et_tensorrt.__file__).resolve().parent.parent)
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}


def _first_line(exc: BaseException) -> tuple[str, int]:
    text = f"{type(exc).__name__}: {exc}"
    return text.splitlines()[0], len(text.splitlines())


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12] if path.exists() else "absent"


def _partials(folder: Path) -> list[str]:
    return [n for n in os.listdir(folder) if n.endswith(".partial") or n.startswith(".tmp-")]


# ---------------------------------------------------------------------------------------------- rows


def row_full_disk_save(p: Programs) -> Outcome:
    import et_tensorrt

    model = p.exported("forward")
    with small_disk() as (folder, how):
        previous = folder / "model.pte"
        previous.write_bytes(b"a previous good program" * 1000)
        before = _sha(previous)
        try:
            et_tensorrt.save(previous, model, constant_methods=p.methods(), named_data="ptd")
            return Outcome(f"{how}: the save succeeded (the disk did not fill)", False)
        except OSError as exc:
            line, lines = _first_line(exc)
        kept, left = _sha(previous) == before, sorted(os.listdir(folder))
        named = str(previous) in line or str(previous.with_suffix(".ptd")) in line
    ok = kept and left == ["model.pte"] and named and lines == 1
    what = f"{how}: {line!r}; previous file {'intact' if kept else 'DESTROYED'}, left in the folder: {left}"
    return Outcome(what, ok, {"error": line, "previous_intact": kept, "left": left})


_CHILD_SAVE = """
import sys, torch
import et_tensorrt
from et_tensorrt.lowering import lower_program, write_program
from transformers import LlamaConfig, LlamaForCausalLM
torch.manual_seed(0)
config = LlamaConfig(vocab_size=16000, hidden_size=256, intermediate_size=512, num_hidden_layers=1,
                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
from et_tensorrt.llm import export_prefill_decode
program = lower_program(export_prefill_decode(LlamaForCausalLM(config).eval())["decode"])
print("writing", flush=True)
write_program(program, sys.argv[1])
print("saved", flush=True)
"""


def row_killed_save(p: Programs) -> Outcome:
    """A 16k-vocabulary Llama (~70 MB .pte) saved by a child, SIGKILLed once 10 MB of the new file are written."""
    folder = p.folder / "killed"
    folder.mkdir(exist_ok=True)
    target = folder / "model.pte"
    target.write_bytes(b"a previous good program" * 1000)
    before, size = _sha(target), target.stat().st_size
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD_SAVE, str(target)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=_child_env(),
    )
    assert child.stdout.readline() == b"writing\n", "the child failed before writing"
    start, written = time.monotonic(), 0
    while written < 10 << 20 and child.poll() is None:
        with contextlib.suppress(OSError):  # the new file: a temp beside the target, or the target itself
            sizes = [(folder / n).stat().st_size for n in os.listdir(folder) if n != "model.pte"]
            written = max([*sizes, target.stat().st_size if target.stat().st_size != size else 0])
        time.sleep(0.005)
    child.send_signal(signal.SIGKILL)
    child.wait()
    seconds = time.monotonic() - start
    kept = _sha(target) == before
    left = _partials(folder)
    sizes = {n: (folder / n).stat().st_size for n in left}
    what = (
        f"killed {seconds:.2f} s into the write ({written / 2**20:.1f} MiB written): previous file "
        f"{'intact' if kept else 'DESTROYED (' + str(target.stat().st_size) + ' bytes)'}; left beside it: "
        f"{len(left)} temp file(s)"
    )
    with contextlib.suppress(ImportError, OSError):  # the next save there clears the dead one's temp
        from et_tensorrt.atomic_file import write_bytes

        write_bytes(target, b"next")
    cleared = not _partials(folder)
    what += ", removed by the next save" if left and cleared else ""
    return Outcome(what, kept and cleared, {"seconds": seconds, "written": written, "temps": sizes})


def _lower_counting(p: Programs, name: str) -> tuple[str | None, dict, list[str], float]:
    """Lowers ``name`` in this process (ET_TENSORRT_CACHE_DIR as set); (error, preprocess counts, build-cache
    notices, max |logits - eager|)."""
    import torch

    import et_tensorrt
    from et_tensorrt.backend import preprocess

    before = dict(preprocess.stats)
    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda r: records.append(r.getMessage())
    logger = logging.getLogger("et_tensorrt")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)  # the notices, whatever the root logger lets through
    try:
        pte = et_tensorrt.lower(p.exported(name))
    except Exception as exc:  # noqa: BLE001 - the outcome being measured
        return _first_line(exc)[0], {}, records, float("nan")
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    made = {k: preprocess.stats[k] - before.get(k, 0) for k in ("built", "cache_hits", "fallbacks")}
    ids, positions = torch.tensor([[5, 6, 7]]), torch.arange(3)
    got = et_tensorrt.Runner(pte).run([ids, positions])[0]
    with torch.no_grad():
        expected = p.model()(input_ids=ids, position_ids=positions[None]).logits
    notices = [m for m in records if m.startswith("build cache:")]
    return None, made, notices, float((got - expected).abs().max())


def row_full_cache(p: Programs) -> Outcome:
    from et_tensorrt.builder import build_cache

    with small_disk() as (folder, how), _env(build_cache.ENV_CACHE_DIR, str(folder)):
        error, made, notices, err = _lower_counting(p, "forward")
        left = _partials(folder) + [n for n in os.listdir(folder) if n.endswith(".etrc")]
    if error:
        return Outcome(f"{how}: lowering failed: {error}", False, {"error": error})
    ok = made.get("built") == 1 and not made.get("fallbacks") and len(notices) == 1 and err < 1e-4
    what = f"{how}: lowered, engines {made}, {len(notices)} notice(s) {notices[:1]}, max error {err:.1e}, left {left}"
    return Outcome(what, ok, {"made": made, "notices": notices, "max_error": err})


def row_read_only_cache(p: Programs) -> Outcome:
    from et_tensorrt.builder import build_cache

    prepared = p.folder / "prepared-cache"
    with _env(build_cache.ENV_CACHE_DIR, str(prepared)):
        _lower_counting(p, "forward")  # the cache prepared ahead (the entry stored)
    with read_only(prepared) as (folder, how), _env(build_cache.ENV_CACHE_DIR, str(folder)):
        error, made, notices, err = _lower_counting(p, "forward")
    if error:
        return Outcome(f"{how}: lowering failed: {error}", False)
    ok = made.get("cache_hits") == 1 and made.get("built") == 0 and not notices
    what = f"{how}: engines {made}, {len(notices)} notice(s){' ' + str(notices[:1]) if notices else ''}"
    return Outcome(what, ok, {"made": made, "notices": notices})


@contextlib.contextmanager
def _env(name: str, value: str):
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


def _refusal(run: Callable[[], object]) -> tuple[str, int]:
    try:
        run()
    except Exception as exc:  # noqa: BLE001 - the outcome being measured
        return _first_line(exc)
    return "no error (logits returned)", 0


def row_generation_reasons(p: Programs) -> Outcome:
    """Each front door with an empty prompt, a prompt past the cache, and a full context: what it says."""
    from et_tensorrt.llm import TextGenerator

    long = "the cat sat on the mat. " * 30
    said, lines = {}, []

    def full(g):
        for _ in range(CONTEXT):
            g.generate("the cat sat on the mat.", max_new_tokens=CONTEXT)

    for name, door in (("forward", "TextGenerator"), ("two", "MethodsDriver")):
        for case, run in (
            ("empty prompt", lambda g: g.generate("", max_new_tokens=4)),
            ("prompt past the cache", lambda g: g.generate(long, max_new_tokens=4)),
            ("full context", full),
        ):
            line, n = _refusal(lambda: run(TextGenerator(p.path(name), p.tokenizer)))
            said[f"{door}, {case}"] = line
            lines.append(n)
    cli = subprocess.run(
        [sys.executable, "-m", "et_tensorrt", "generate", str(p.path("forward")), "--tokenizer", str(p.tokenizer),
         "--prompt", long],
        capture_output=True, text=True, env=_child_env(),
    )  # fmt: skip
    errors = [line for line in cli.stderr.splitlines() if line.startswith("error:")]
    said["et-tensorrt generate, prompt past the cache"] = errors[-1] if errors else cli.stderr.strip()[-200:]
    reasons = {"empty prompt": "empty", "prompt past the cache": "cache holds", "full context": "context is full"}
    ok = all(n == 1 for n in lines) and len(errors) == 1 and "Traceback" not in cli.stderr
    ok = ok and all(reasons[case.split(", ")[1]] in line for case, line in said.items())
    what = "; ".join(f"{case}: {line!r}" for case, line in said.items())
    return Outcome(what, ok, said)


def row_mismatched_positions(p: Programs) -> Outcome:
    import torch

    import et_tensorrt

    two = et_tensorrt.Runner(p.path("two"))
    forward = et_tensorrt.Runner(p.path("forward"))
    cases = {
        "prefill: 3 tokens, 5 positions": lambda: two.run([torch.tensor([[5, 6, 7]]), torch.arange(0, 5)], "prefill"),
        "forward: 3 tokens at 61..65": lambda: forward.run([torch.tensor([[5, 6, 7]]), torch.arange(61, 66)]),
        "decode: 1 token, 3 positions": lambda: two.run([torch.tensor([[5]]), torch.arange(3)], "decode"),
    }
    said = {case: _refusal(run) for case, run in cases.items()}
    ok = all(lines == 1 and ("agree" in line or "at most" in line) for line, lines in said.values())
    what = "; ".join(f"{case}: {line!r}" for case, (line, _) in said.items())
    return Outcome(what, ok, {case: line for case, (line, _) in said.items()})


def row_token_past_vocab(p: Programs) -> Outcome:
    import torch

    import et_tensorrt

    two = et_tensorrt.Runner(p.path("two"))
    vocab = p.vocab
    line, lines = _refusal(lambda: two.run([torch.tensor([[vocab + 7]]), torch.tensor([3])], "decode"))
    past, _ = _refusal(lambda: two.run([torch.tensor([[5]]), torch.tensor([CONTEXT + 1])], "decode"))
    ok = lines == 1 and "input 0 ('input_ids')" in line and "input 1 ('cache_position')" in past
    what = f"token {vocab + 7}: {line!r} ({lines} line(s)); decode at position {CONTEXT + 1}: {past!r}"
    return Outcome(what, ok, {"token_error": line, "token_error_lines": lines, "position_error": past})


# The rows, by the numbers: (the fault, the function that runs it; None: another benchmark's row).
ROWS: dict[int, tuple[str, Callable[[Programs], Outcome] | None]] = {
    1: ("et_tensorrt.save onto a filesystem that fills up", row_full_disk_save),
    2: ("the saving process SIGKILLed mid-write", row_killed_save),
    3: ("the engine cache on a full filesystem", row_full_cache),
    4: ("a read-only engine cache holding a valid entry", row_read_only_cache),
    5: ("Runner per conversation / Runner.reset(): memory kept", None),
    6: ("damaged .ptd key tables through executorch.runtime", None),
    7: ("generation that cannot go on: what each LLM front door says", row_generation_reasons),
    8: ("positions and tokens of different lengths", row_mismatched_positions),
    9: ("a token id >= vocab; decode's input 1 named", row_token_past_vocab),
    10: ("Runner.run vs ExecuTorch's Method.execute, one op", None),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", default=",".join(str(r) for r, (_, fn) in ROWS.items() if fn), help="rows to run")
    parser.add_argument("--json", type=Path, help="write the outcomes here as JSON")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    logging.basicConfig(level=logging.ERROR)
    table = []
    with tempfile.TemporaryDirectory(prefix="et-reliability-") as folder:
        programs = Programs(Path(folder))
        for row in (int(r) for r in args.rows.split(",")):
            fault, run = ROWS[row]
            if run is None:
                table.append((row, fault, "not run here (rows 5, 6, 10: add a function to ROWS)", None, 0.0))
                continue
            start = time.perf_counter()
            try:
                outcome = run(programs)
            except Exception as exc:  # noqa: BLE001 - a row that crashes is its outcome
                outcome = Outcome(f"the row itself failed: {_first_line(exc)[0]}", False)
            table.append((row, fault, outcome.what, outcome.ok, time.perf_counter() - start))
            print(f"row {row}: {'ok' if outcome.ok else 'NOT OK'}: {outcome.what}", file=sys.stderr, flush=True)
    print("| # | fault | what happened | as asked | s |\n|---|---|---|---|---:|")
    for row, fault, what, ok, seconds in table:
        mark = "-" if ok is None else "yes" if ok else "**no**"
        print(f"| {row} | {fault} | {what} | {mark} | {seconds:.0f} |")
    if args.json:
        rows = [dict(zip(("row", "fault", "what", "ok", "seconds"), r)) for r in table]
        args.json.write_text(json.dumps(rows, indent=1))
    return 0 if all(ok is not False for *_, ok, _ in table) else 1


if __name__ == "__main__":
    sys.exit(main())
