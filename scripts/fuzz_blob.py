"""Fuzz the C++ delegate-blob parser through the binding (`et_tensorrt.format._reader.parse_blob`).

    python scripts/fuzz_blob.py -runs=60000 [corpus_dir]      # atheris / libFuzzer flags

The contract checked for every input (``check_blob``): the parser either returns a result or raises
``BlobFormatError`` — any other exception, and of course a crash, is a finding. When it parses, the
result must be self-consistent (every section and WEIGHTS datum inside the blob, WEIGHTS data 64-byte
aligned and exactly as large as its sizes, strides and dtype say) and ``blob.read_blob`` (the Python
wrapper over the same reader) must agree with it or refuse only METADATA that is not JSON.

Each input is parsed twice: as given, and "fixed up" (magic, version, flags, header size and
total_size patched to be valid; version 1 or 2), so that mutations reach the section table, the
IO_TABLE and the WEIGHTS table instead of dying at the length check. The seed corpus is every blob in
tests/blob_fixtures.py (valid, v1, engine-only and damaged).

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


def fix_up(data: bytes) -> bytes | None:
    """The same bytes with a valid-looking header (None when too short to have one). Version 2, whose
    sections carry no digests, so a mutation reaches the section parsers instead of the DIGESTS check (the
    state flag is kept, so STATE is parsed too)."""
    if len(data) < HEADER.size:
        return None
    out = bytearray(data)
    version = 1 if data[4] == 1 else 2
    flags = data[6] & 1 if version == 2 else 0
    struct.pack_into("<4sHHI", out, 0, b"ETRT", version, flags, 32)
    struct.pack_into("<Q", out, 16, len(out))
    return bytes(out)


def check_blob(data: bytes) -> str:
    """Parse with the C++ reader; returns "ok" or "rejected". Raises AssertionError on a broken contract."""
    from et_tensorrt.errors import BlobFormatError
    from et_tensorrt.format import _reader
    from et_tensorrt.format import blob as B
    from et_tensorrt.format.dtypes import element_size

    try:
        parsed = _reader.parse_blob(data)
    except BlobFormatError as e:
        assert str(e).startswith("delegate blob: "), str(e)
        return "rejected"
    # Parsed: the result must describe these bytes.
    import math

    assert parsed["version"] in (1, 2, 3)
    assert parsed["digests_verified"] == (parsed["version"] == 3)
    base = memoryview(data)
    for key in ("engine", "program", "graph", "weights_section", "refit_map", "metadata"):
        view = parsed[key]
        if view is not None:
            assert view.obj is not None and len(view) <= len(data)
    assert (parsed["graph"] is None) == (parsed["weights_section"] is None) or parsed["version"] == 1
    for w in parsed["weights"]:
        assert w["offset"] % 64 == 0 and w["offset"] + w["nbytes"] <= len(data), w
        sizes, strides = w["sizes"], w["strides"]
        span = 0 if 0 in sizes else 1 + sum((n - 1) * st for n, st in zip(sizes, strides))
        assert w["nbytes"] == span * element_size(w["dtype"]) and len(sizes) <= 16 and math.prod(sizes) < 2**63, w
    assert len(base) == len(data)
    for entry in parsed["inputs"] + parsed["outputs"]:
        assert len(entry["dims"]) <= 16
        for lo, opt, hi in entry["dims"]:
            assert 0 <= lo <= opt and (hi == -1 or opt <= hi), (lo, opt, hi)
        assert entry["device"][0] in (B.DEVICE_CPU, B.DEVICE_CUDA)
    assert all(e["role"] == "input" for e in parsed["inputs"])
    assert all(e["role"] == "output" for e in parsed["outputs"])
    # The Python wrapper fills its dataclasses from the same reader: it agrees, or refuses METADATA that
    # is not a JSON object (it decodes METADATA; the runtime never reads it).
    try:
        py = B.read_blob(data)
    except BlobFormatError as e:
        assert "METADATA" in str(e), str(e)
        return "ok"
    assert len(py.inputs) == len(parsed["inputs"]) and len(py.outputs) == len(parsed["outputs"])
    assert [w.name for w in py.weights] == [w["name"] for w in parsed["weights"]]
    return "ok"


def check_one(data: bytes) -> None:
    check_blob(data)
    fixed = fix_up(data)
    if fixed is not None:
        check_blob(fixed)


def seeds() -> list[bytes]:
    sys.path.insert(0, str(ROOT / "tests"))
    import blob_fixtures as F

    out = [
        F.valid_blob(),
        F.valid_blob_without_engine(),
        F.valid_blob_with_unknown_section(),
        F.valid_engine_only_blob(),
        F.valid_v1_blob(),
        F.valid_v2_blob(),
        F.valid_stateful_blob(),
        F.valid_recipe_blob(),
        F.valid_named_blob(),
        F.valid_checked_named_blob(),
        F.valid_guarded_blob(),
    ]
    out += [data for data, _ in F.damaged_blobs().values()]
    return out


def main() -> None:
    import atheris

    with atheris.instrument_imports(include=["et_tensorrt"]):
        import et_tensorrt  # noqa: F401
        import et_tensorrt.format.blob  # noqa: F401

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
