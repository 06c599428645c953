"""Fuzz the C++ delegate-blob parser through the binding (`et_tensorrt._C.parse_blob`).

    python scripts/fuzz_blob.py -runs=60000 [corpus_dir]      # atheris / libFuzzer flags

The contract checked for every input (``check_blob``): the parser either returns a result or raises
``BlobFormatError`` — any other exception, and of course a crash, is a finding. When it parses, the
result must be self-consistent and agree with the Python reader (et_tensorrt.blob) wherever
that reader accepts the same bytes.

Each input is parsed twice: as given, and "fixed up" (magic, version, flags, header size and
total_size patched to be valid), so that mutations reach the section table and the IO_TABLE instead of
dying at the length check. The seed corpus is every blob in tests/blob_fixtures.py (valid and damaged).

The C++ is not coverage-instrumented (gcc has no -fsanitize=fuzzer-no-link), so atheris guides on
Python coverage only; on the C++ side this is mutation fuzzing from the fixture seeds. Run it against
the ASan build (scripts/sanitize.sh's package dir on PYTHONPATH + LD_PRELOAD) to catch silent
out-of-bounds reads.
"""

from __future__ import annotations

import os
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

HEADER = struct.Struct("<4sHHIIQbb6s")
KNOWN: dict[str, int] = {}  # known finding -> inputs that hit it (only with FUZZ_TOLERATE_KNOWN=1)


def fix_up(data: bytes) -> bytes | None:
    """The same bytes with a valid-looking header (None when too short to have one)."""
    if len(data) < HEADER.size:
        return None
    out = bytearray(data)
    struct.pack_into("<4sHHI", out, 0, b"ETRT", 1, 0, 32)
    struct.pack_into("<Q", out, 16, len(out))
    return bytes(out)


def note_known(what: str) -> None:
    """Count a known finding; libFuzzer leaves through _exit, so the counts go to a file as they change."""
    KNOWN[what] = KNOWN.get(what, 0) + 1
    path = os.environ.get("FUZZ_STATS_FILE")
    if path:
        with open(path, "w") as f:
            for k, v in KNOWN.items():
                f.write(f"{v}\t{k}\n")


def check_blob(data: bytes) -> str:
    """Parse with the C++ reader; returns "ok" or "rejected". Raises AssertionError on a broken contract."""
    from et_tensorrt import _C
    from et_tensorrt import blob as B
    from et_tensorrt.errors import BlobFormatError

    try:
        parsed = _C.parse_blob(data)
    except BlobFormatError as e:
        assert str(e).startswith("delegate blob: "), str(e)
        return "rejected"
    except UnicodeDecodeError:
        # Known finding (docs/reliability.md, F1): the C++ reader accepts a non-UTF-8 I/O name and the
        # binding's str conversion raises. Counted, not tolerated, unless FUZZ_TOLERATE_KNOWN=1.
        if os.environ.get("FUZZ_TOLERATE_KNOWN") == "1":
            note_known("F1 non-UTF-8 I/O name -> UnicodeDecodeError (not BlobFormatError)")
            return "known"
        raise
    # Parsed: the result must describe these bytes.
    assert parsed["version"] == 1
    assert parsed["engine_size"] + parsed["program_size"] + len(parsed["metadata"]) <= len(data)
    for entry in parsed["inputs"] + parsed["outputs"]:
        assert len(entry["dims"]) <= 16
        for lo, opt, hi in entry["dims"]:
            assert 0 <= lo <= opt and (hi == -1 or opt <= hi), (lo, opt, hi)
        assert entry["device"].type in ("cpu", "cuda")
    assert all(e["role"] == "input" for e in parsed["inputs"])
    assert all(e["role"] == "output" for e in parsed["outputs"])
    # The Python reader is stricter on METADATA (JSON) and names (UTF-8) and laxer on dims and dtype
    # codes; where both accept, they must agree.
    try:
        py = B.read_blob(data)
    except BlobFormatError:
        return "ok"
    assert len(py.inputs) == len(parsed["inputs"]) and len(py.outputs) == len(parsed["outputs"])
    assert (len(py.engine) if py.engine is not None else 0) == parsed["engine_size"]
    assert len(py.program) == parsed["program_size"]
    for a, b in zip(py.inputs + py.outputs, parsed["inputs"] + parsed["outputs"]):
        assert a.name == b["name"], (a.name, b["name"])
        assert [(d.min, d.opt, d.max) for d in a.dims] == [tuple(d) for d in b["dims"]]
    return "ok"


def check_one(data: bytes) -> None:
    check_blob(data)
    fixed = fix_up(data)
    if fixed is not None:
        check_blob(fixed)


def seeds() -> list[bytes]:
    sys.path.insert(0, str(ROOT / "tests"))
    import blob_fixtures as F

    out = [F.valid_blob(), F.valid_blob_without_engine(), F.valid_blob_with_unknown_section()]
    out += [data for data, _ in F.damaged_blobs().values()]
    return out


def main() -> None:
    import atheris

    with atheris.instrument_imports(include=["et_tensorrt"]):
        import et_tensorrt  # noqa: F401
        import et_tensorrt.blob  # noqa: F401

    argv = list(sys.argv)
    dirs = [a for a in argv[1:] if not a.startswith("-")]
    if not dirs:
        dirs = [os.environ.get("FUZZ_BLOB_CORPUS", "/tmp/et_tensorrt_fuzz_blob_corpus")]
        argv.append(dirs[0])
    corpus = Path(dirs[0])
    if corpus.is_dir() or not corpus.exists():  # a directory: seed it (a file argument is a reproducer)
        corpus.mkdir(parents=True, exist_ok=True)
        for i, data in enumerate(seeds()):
            (corpus / f"seed_{i:02d}").write_bytes(data)
    atheris.Setup(argv, check_one)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
