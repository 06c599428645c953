"""The GPU check's transport (scripts/gpu_check/transport.py): calls within the limit, reassembly on the
machine, and a machine that went cold between calls detected and wiped, never half-built."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts" / "gpu_check"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"gpu_check_{name}", SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


transport = _load("transport")
MiB = transport.MiB
TREE = 300 * 1024  # the working tree that travels with every call
LIMIT = TREE + transport.MANIFEST_RESERVE + 2 * MiB  # room for 2 MiB of pieces per call


@pytest.fixture
def payload(tmp_path) -> dict[str, Path]:
    files = {}
    for name, size in (("small.tar", 300 * 1024), ("medium.zip", 1 * MiB + 7), ("big.whl", 5 * MiB + 3), ("empty", 0)):
        path = tmp_path / "payload" / name
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(os.urandom(size))
        files[name] = path
    return files


def _bundle(tmp_path, payload):
    calls = transport.plan_calls([(n, p.stat().st_size) for n, p in payload.items()], TREE, LIMIT)
    manifest = transport.write_calls(tmp_path / "bundle", payload, calls, {"roles": {}})
    return manifest, tmp_path / "bundle"


def test_calls_stay_within_the_limit_and_cover_every_byte(tmp_path, payload):
    calls = transport.plan_calls([(n, p.stat().st_size) for n, p in payload.items()], TREE, LIMIT)
    assert len(calls) == 4  # 6.6 MiB in 2 MiB calls
    for pieces in calls:
        assert TREE + transport.MANIFEST_RESERVE + sum(p.size for p in pieces) <= LIMIT
    for name, path in payload.items():
        pieces = [p for c in calls for p in c if p.file == name]
        assert [p.part for p in pieces] == list(range(1, len(pieces) + 1))
        assert all(p.parts == len(pieces) for p in pieces)
        assert sum(p.size for p in pieces) == path.stat().st_size
        assert [p.offset for p in pieces] == [sum(q.size for q in pieces[:i]) for i in range(len(pieces))]
    assert next(p for p in calls[0] if p.file == "small.tar").stored_as == "small.tar"  # whole files keep their name
    assert next(p for c in calls for p in c if p.file == "big.whl").stored_as == "big.whl.part1of4"


def test_a_working_tree_too_large_for_a_call_is_refused():
    with pytest.raises(ValueError, match="working tree"):
        transport.plan_calls([("x", 10)], tree_bytes=LIMIT, limit=LIMIT)


def test_written_calls_reassemble_on_the_machine(tmp_path, payload):
    (tmp_path / "bundle" / "call9").mkdir(parents=True)  # an earlier, longer bundle's last call
    (tmp_path / "bundle" / "calls.txt").write_text("an earlier bundle's call list\n")
    manifest, bundle = _bundle(tmp_path, payload)
    assert not (bundle / "call9").exists()
    for i in range(len(manifest["calls"])):
        carried = transport.folder_bytes(bundle / f"call{i + 1}")
        assert TREE + carried <= LIMIT
    stash = transport.Stash(tmp_path / "machine", manifest)
    assembled = []
    for call in range(1, len(manifest["calls"]) + 1):
        stash.begin(call)
        assembled += stash.add_call(call, bundle / f"call{call}")
    assert sorted(assembled) == sorted(payload)
    for name, path in payload.items():
        assert stash.file(name).read_bytes() == path.read_bytes()
    assert not list(stash.pieces_dir.iterdir())  # pieces are dropped once their file is whole


def test_a_cold_machine_between_calls_is_detected_and_the_stash_wiped(tmp_path, payload):
    manifest, bundle = _bundle(tmp_path, payload)
    root = tmp_path / "machine"
    stash = transport.Stash(root, manifest)
    stash.begin(1)
    stash.add_call(1, bundle / "call1")
    stash.record_step("build", "ok")
    # The machine went cold: a bare /tmp. The next call must refuse, not build on nothing.
    transport.Stash(root, manifest).wipe()
    with pytest.raises(transport.ColdMachine, match="Start again with call 1"):
        transport.Stash(root, manifest).begin(2)
    assert not root.exists()


def test_a_missing_or_damaged_earlier_piece_is_a_cold_start(tmp_path, payload):
    manifest, bundle = _bundle(tmp_path, payload)
    root = tmp_path / "machine"
    stash = transport.Stash(root, manifest)
    stash.begin(1)
    stash.add_call(1, bundle / "call1")
    stash.begin(2)
    stash.add_call(2, bundle / "call2")
    stash.record_step("sources", "ok")
    piece = next(stash.pieces_dir.iterdir())  # a piece of a file still waiting for call 3
    piece.write_bytes(b"x" + piece.read_bytes()[1:])
    with pytest.raises(transport.ColdMachine, match="damaged"):
        transport.Stash(root, manifest).begin(3)
    assert not root.exists()  # no half-built state: the steps done are gone with it


def test_skipping_a_call_or_mixing_bundles_is_refused(tmp_path, payload):
    manifest, bundle = _bundle(tmp_path, payload)
    root = tmp_path / "machine"
    stash = transport.Stash(root, manifest)
    stash.begin(1)
    stash.add_call(1, bundle / "call1")
    with pytest.raises(transport.ColdMachine, match=r"call\(s\) \[2\]"):
        transport.Stash(root, manifest).begin(3)
    stash = transport.Stash(root, manifest)
    stash.begin(1)
    stash.add_call(1, bundle / "call1")
    other = dict(manifest, bundle_id="0" * 16)
    with pytest.raises(transport.ColdMachine, match="another bundle|belongs to bundle"):
        transport.Stash(root, other).begin(2)


def test_a_piece_damaged_in_transfer_asks_for_the_same_call_again(tmp_path, payload):
    manifest, bundle = _bundle(tmp_path, payload)
    victim = next(p for p in (bundle / "call1").iterdir() if p.name != transport.MANIFEST)
    victim.write_bytes(victim.read_bytes()[:-1])
    stash = transport.Stash(tmp_path / "machine", manifest)
    stash.begin(1)
    with pytest.raises(transport.TransferError, match="send call 1 again"):
        stash.add_call(1, bundle / "call1")
