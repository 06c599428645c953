"""How the GPU-check bundle travels to the device machine, and how the machine puts it back together.

Limits that shape it (the device tool's README):
- a device call carries the working tree plus the ignored folders named in ``carry``, 64 MiB at most in all;
  we plan for CALL_LIMIT (60 MiB), the working tree counted in every call;
- what a call writes on the machine survives only while the machine stays warm (about 30 s after the call
  returns); a machine that went cold comes back bare.

Bundle side (``plan_calls``, ``write_calls``): the payload files, in a fixed order, fill call 1, then call 2,
...; a file larger than the room left continues in the next call as its next piece. Each call's folder holds
its pieces and the whole manifest (every file's and piece's SHA-256, and the bundle id).

Device side (``Stash``): call N first checks that calls 1..N-1 of the same bundle are all in the stash, their
checksums recomputed. Anything missing or different means the machine went cold in between (or another
bundle was sent): the stash is deleted and the call stops with ColdMachine, which says to start again at
call 1. Then the call adds its own pieces and assembles every file whose pieces are all there, checked
against the file's hash. Nothing is built from a partial file, and a step is marked done only after it
succeeded, so a stash is never half-built.

Standard library only: this runs on the device machine before anything is installed there.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import os
import shutil
import tarfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

MiB = 1 << 20
CALL_LIMIT = 60 * MiB
MANIFEST = "manifest.json"
MANIFEST_RESERVE = 256 * 1024  # room kept in every call for its copy of the manifest
FORMAT = 1
_CHUNK = 4 * MiB


def sha256_file(path: str | os.PathLike, offset: int = 0, size: int | None = None) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        f.seek(offset)
        left = os.path.getsize(path) - offset if size is None else size
        while left > 0:
            chunk = f.read(min(_CHUNK, left))
            if not chunk:
                raise OSError(f"{path} ended {left} bytes early")
            digest.update(chunk)
            left -= len(chunk)
    return digest.hexdigest()


def record_hashes(record_text: str) -> dict[str, str]:
    """A wheel's RECORD rows -> {path: sha256 hex} (RECORD stores urlsafe base64 without padding)."""
    out = {}
    for row in csv.reader(io.StringIO(record_text)):
        if len(row) >= 2 and row[1].startswith("sha256="):
            digest = row[1][len("sha256=") :]
            out[row[0]] = base64.urlsafe_b64decode(digest + "=" * (-len(digest) % 4)).hex()
    return out


def extract_tar(archive: Path, dest: Path) -> None:
    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "data_filter"):  # refuses absolute paths, links out of dest, devices
            tar.extractall(dest, filter="data")
        else:
            tar.extractall(dest)


@dataclass
class Piece:
    """Bytes [offset, offset + size) of one payload file, carried by one call."""

    file: str
    part: int  # 1-based
    parts: int
    offset: int
    size: int
    sha256: str = ""

    @property
    def stored_as(self) -> str:
        return self.file if self.parts == 1 else f"{self.file}.part{self.part}of{self.parts}"


def plan_calls(files: list[tuple[str, int]], tree_bytes: int, limit: int = CALL_LIMIT) -> list[list[Piece]]:
    """Pieces per call for ``files`` ((name, size), in carrying order); every call, working tree included,
    stays within ``limit``."""
    room = limit - tree_bytes - MANIFEST_RESERVE
    if room < MiB:
        raise ValueError(
            f"the working tree ({tree_bytes / MiB:.1f} MiB) leaves no room in a {limit / MiB:.0f} MiB "
            "call: ignore or remove large untracked files"
        )
    calls: list[list[Piece]] = [[]]
    left = room
    for name, size in files:
        pieces = []
        offset = 0
        while True:
            if left == 0:
                calls.append([])
                left = room
            take = min(size - offset, left)
            piece = Piece(name, len(pieces) + 1, 0, offset, take)
            calls[-1].append(piece)
            pieces.append(piece)
            offset += take
            left -= take
            if offset >= size:
                break
        for piece in pieces:
            piece.parts = len(pieces)
    return calls


def _copy_range(src: Path, dst: Path, offset: int, size: int) -> None:
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        fin.seek(offset)
        left = size
        while left > 0:
            chunk = fin.read(min(_CHUNK, left))
            fout.write(chunk)
            left -= len(chunk)


def write_calls(out_dir: Path, files: dict[str, Path], calls: list[list[Piece]], extra: dict) -> dict:
    """Write ``out_dir/callN/`` (pieces + manifest) for every call; returns the manifest."""
    file_table = {name: {"size": path.stat().st_size, "sha256": sha256_file(path)} for name, path in files.items()}
    for pieces in calls:
        for piece in pieces:
            piece.sha256 = sha256_file(files[piece.file], piece.offset, piece.size)
    manifest = {
        "format": FORMAT,
        "files": file_table,
        "calls": [{"call": i + 1, "pieces": [asdict(p) for p in pieces]} for i, pieces in enumerate(calls)],
        **extra,
    }
    manifest["bundle_id"] = hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()[:16]
    manifest["created"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for stale in out_dir.glob("call[0-9]*"):  # an earlier bundle's calls must not travel with this one
        if stale.is_dir():
            shutil.rmtree(stale)
    for i, pieces in enumerate(calls):
        call_dir = out_dir / f"call{i + 1}"
        call_dir.mkdir(parents=True)
        for piece in pieces:
            src = files[piece.file]
            if piece.parts == 1:
                shutil.copyfile(src, call_dir / piece.stored_as)
            else:
                _copy_range(src, call_dir / piece.stored_as, piece.offset, piece.size)
        text = json.dumps(manifest, indent=1, sort_keys=True)
        if len(text) > MANIFEST_RESERVE:
            raise ValueError(f"the manifest is {len(text)} bytes, more than the {MANIFEST_RESERVE} reserved per call")
        (call_dir / MANIFEST).write_text(text)
    return manifest


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def pieces_of(manifest: dict, call: int) -> list[Piece]:
    return [Piece(**p) for p in manifest["calls"][call - 1]["pieces"]]


def read_manifest(call_dir: Path) -> dict:
    path = call_dir / MANIFEST
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: carry the bundle's call folder (see docs/gpu-check.md)")
    manifest = json.loads(path.read_text())
    if manifest.get("format") != FORMAT:
        raise ValueError(f"{path}: bundle format {manifest.get('format')}, this script reads {FORMAT}; rebuild it")
    return manifest


class ColdMachine(Exception):
    """The stash lacks an earlier call of this bundle: the machine went cold (or another bundle was sent)."""


class TransferError(Exception):
    """A piece this call carried does not match its checksum: send the same call again."""


class Stash:
    """The device machine's copy of the bundle: pieces, assembled files, and which steps are done."""

    def __init__(self, root: Path, manifest: dict):
        self.root = root
        self.manifest = manifest
        self.bundle_id = manifest["bundle_id"]
        self.pieces_dir = root / "pieces"
        self.files_dir = root / "files"
        self.prefix = root / "prefix"  # what the steps build: sources, unpacked wheels, the extension
        self._state_path = root / "state.json"

    # -- state -----------------------------------------------------------------------------------------
    def _state(self) -> dict:
        if not self._state_path.is_file():
            return {"bundle_id": None, "calls": [], "steps": {}}
        return json.loads(self._state_path.read_text())

    def _save(self, state: dict) -> None:
        tmp = self._state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=1))
        tmp.replace(self._state_path)

    def wipe(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    # -- calls -----------------------------------------------------------------------------------------
    def begin(self, call: int) -> None:
        """Call 1 starts a fresh stash; call N > 1 requires calls 1..N-1 of this bundle, intact."""
        if call == 1:
            self.wipe()
            for d in (self.pieces_dir, self.files_dir, self.prefix):
                d.mkdir(parents=True)
            self._save({"bundle_id": self.bundle_id, "calls": [], "steps": {}})
            return
        problem = self._missing_before(call)
        if problem:
            self.wipe()
            raise ColdMachine(
                f"{problem}; the stash was deleted. Start again with call 1 (the machine went cold "
                "between calls, or another bundle was sent)"
            )

    def _missing_before(self, call: int) -> str:
        state = self._state()
        if state["bundle_id"] is None:
            return f"no stash at {self.root}"
        if state["bundle_id"] != self.bundle_id:
            return f"the stash holds bundle {state['bundle_id']}, this call belongs to bundle {self.bundle_id}"
        missing = [c for c in range(1, call) if c not in state["calls"]]
        if missing:
            return f"call(s) {missing} of bundle {self.bundle_id} never reached this machine"
        for c in range(1, call):
            for piece in pieces_of(self.manifest, c):
                problem = self._piece_problem(piece)
                if problem:
                    return problem
        return ""

    def _piece_problem(self, piece: Piece) -> str:
        assembled = self.files_dir / piece.file
        if assembled.is_file():
            return "" if self._file_ok(piece.file) else f"assembled file {piece.file} changed"
        path = self.pieces_dir / piece.stored_as
        if not path.is_file():
            return f"piece {piece.stored_as} is missing"
        if path.stat().st_size != piece.size or sha256_file(path) != piece.sha256:
            return f"piece {piece.stored_as} is damaged"
        return ""

    def _file_ok(self, name: str) -> bool:
        expected = self.manifest["files"][name]
        path = self.files_dir / name
        return path.stat().st_size == expected["size"] and sha256_file(path) == expected["sha256"]

    def add_call(self, call: int, call_dir: Path) -> list[str]:
        """Stash this call's pieces (checked) and assemble what is complete; returns the files assembled."""
        for piece in pieces_of(self.manifest, call):
            src = call_dir / piece.stored_as
            if not src.is_file() or src.stat().st_size != piece.size or sha256_file(src) != piece.sha256:
                raise TransferError(f"{src} is missing or does not match its checksum: send call {call} again")
            shutil.copyfile(src, self.pieces_dir / piece.stored_as)
        state = self._state()
        state["calls"] = sorted(set(state["calls"]) | {call})
        self._save(state)
        return self._assemble()

    def _assemble(self) -> list[str]:
        by_file: dict[str, list[Piece]] = {}
        for c in range(1, len(self.manifest["calls"]) + 1):
            for piece in pieces_of(self.manifest, c):
                by_file.setdefault(piece.file, []).append(piece)
        done = []
        for name, pieces in by_file.items():
            target = self.files_dir / name
            if target.is_file() or not all((self.pieces_dir / p.stored_as).is_file() for p in pieces):
                continue
            tmp = target.with_name(target.name + ".tmp")
            with open(tmp, "wb") as out:
                for piece in sorted(pieces, key=lambda p: p.part):
                    with open(self.pieces_dir / piece.stored_as, "rb") as f:
                        shutil.copyfileobj(f, out, _CHUNK)
            if sha256_file(tmp) != self.manifest["files"][name]["sha256"]:
                tmp.unlink()
                raise TransferError(f"{name} reassembled from {len(pieces)} piece(s) does not match its checksum")
            tmp.replace(target)
            for piece in pieces:
                (self.pieces_dir / piece.stored_as).unlink()
            done.append(name)
        return done

    def file(self, name: str) -> Path | None:
        path = self.files_dir / name
        return path if path.is_file() else None

    # -- steps -----------------------------------------------------------------------------------------
    def step_done(self, step: str) -> bool:
        return self._state()["steps"].get(step, {}).get("status") == "ok"

    def record_step(self, step: str, status: str, **info) -> None:
        state = self._state()
        state["steps"][step] = {"status": status, **info}
        self._save(state)

    def steps(self) -> dict:
        return self._state()["steps"]
