"""A full disk, a killed save, a full or read-only engine cache (issue 45, rows 1-4): saves are atomic (the previous
file or nothing at the destination, an error naming the file), and the engine cache never fails a lowering (one
notice; a read-only cache serves its entries). Faults injected (et_tensorrt.testing.faults: no mount needed), and
the same on a real tmpfs and read-only bind mount where this process may mount them (else those tests skip)."""

from __future__ import annotations

import errno
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import et_tensorrt
from et_tensorrt import atomic_file
from et_tensorrt.backend import preprocess
from et_tensorrt.builder import build_cache
from et_tensorrt.lowering import lower_program, write_program
from et_tensorrt.testing import faults


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x):
        return torch.tanh(self.fc(x))


X = torch.randn(2, 8)
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def program():
    """One lowering, written as many times as the tests like: named data in a .ptd, so a save writes two files."""
    torch.manual_seed(0)
    return lower_program(Small().eval(), (X,), named_data="ptd", min_block_size=1)


def _leftovers(folder) -> list[str]:
    return [n for n in os.listdir(folder) if n.endswith(atomic_file.PARTIAL_SUFFIX)]


@pytest.mark.parametrize("fills_in", ["pte", "ptd"])
def test_a_save_onto_a_full_disk_keeps_the_previous_files(program, tmp_path, fills_in):
    pte = tmp_path / "m.pte"
    saved = write_program(program, pte)
    before = {p: open(p, "rb").read() for p in (saved.path, saved.data_path)}
    # the .ptd is written first: a budget inside it fills there, one past it fills in the .pte
    free = saved.ptd_bytes // 2 if fills_in == "ptd" else saved.ptd_bytes + saved.pte_bytes // 2
    with faults.full_disk(tmp_path, free), pytest.raises(OSError) as err:
        write_program(program, pte)
    assert err.value.errno == errno.ENOSPC and f"cannot write {tmp_path / ('m.' + fills_in)}" in str(err.value)
    assert {p: open(p, "rb").read() for p in before} == before and _leftovers(tmp_path) == []
    assert et_tensorrt.Runner(pte, data_path=saved.data_path).run([X])[0].shape == (2, 4)


def test_a_first_save_onto_a_full_disk_leaves_nothing(program, tmp_path):
    with faults.full_disk(tmp_path, 1000), pytest.raises(OSError, match=r"No space left .*after 1,000 bytes"):
        write_program(program, tmp_path / "m.pte")
    assert os.listdir(tmp_path) == []


_SLOW_SAVE = """
import os, sys, time
from et_tensorrt.lowering import write_program

class Slow:  # a program whose bytes come slowly: killed while it writes
    _tensor_data = None
    def write_to_file(self, f):
        f.write(b"new" * 100_000)
        f.flush()
        print("writing", flush=True)
        time.sleep(60)

write_program(Slow(), sys.argv[1])
"""


def test_a_killed_save_leaves_the_previous_file_and_the_next_save_clears_its_partial(tmp_path):
    pte = tmp_path / "m.pte"
    pte.write_bytes(b"previous")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    child = subprocess.Popen([sys.executable, "-c", _SLOW_SAVE, str(pte)], stdout=subprocess.PIPE, env=env)
    assert child.stdout.readline() == b"writing\n"
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert pte.read_bytes() == b"previous" and len(_leftovers(tmp_path)) == 1  # the dead save's temp, not the file
    atomic_file.write_bytes(pte, b"next")
    assert pte.read_bytes() == b"next" and _leftovers(tmp_path) == []


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_a_new_save_gets_the_mode_a_plain_open_gives_under_the_umask(program, tmp_path, umask):
    old = os.umask(umask)
    try:
        saved = write_program(program, tmp_path / "m.pte")
        with open(tmp_path / "plain", "wb"):
            pass
    finally:
        os.umask(old)
    plain = (tmp_path / "plain").stat().st_mode & 0o777
    assert plain == 0o666 & ~umask
    assert {p: oct(os.stat(p).st_mode & 0o777) for p in (saved.path, saved.data_path)} == {
        saved.path: oct(plain),
        saved.data_path: oct(plain),
    }


def test_a_replaced_file_keeps_its_previous_mode(tmp_path):
    pte = tmp_path / "m.pte"
    pte.write_bytes(b"previous")
    for mode in (0o640, 0o444):  # read-only too: the save replaces it (as a plain rename would) and keeps 0444
        pte.chmod(mode)
        atomic_file.write_bytes(pte, b"next")
        assert pte.read_bytes() == b"next" and oct(pte.stat().st_mode & 0o777) == oct(mode)


# ---------------------------------------------------------------------------------------------- the engine cache


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "engines"
    monkeypatch.setenv(build_cache.ENV_CACHE_DIR, str(folder))
    monkeypatch.setattr(build_cache, "_noticed", set())
    return folder


def _lower(caplog, seed: int = 0) -> tuple[dict, list[str]]:
    """Lowers and runs Small; (what preprocess did, the build cache's notices)."""
    before = dict(preprocess.stats)
    torch.manual_seed(seed)
    model = Small().eval()
    with caplog.at_level(logging.WARNING, logger="et_tensorrt"):
        caplog.clear()
        got = et_tensorrt.Runner(et_tensorrt.lower(model, (X,), min_block_size=1)).run([X])[0]
    torch.testing.assert_close(got, model(X))
    notices = [r.getMessage() for r in caplog.records if r.getMessage().startswith("build cache:")]
    return {k: preprocess.stats[k] - before.get(k, 0) for k in ("built", "cache_hits", "fallbacks")}, notices


def test_a_full_cache_disk_builds_with_one_notice(cache, caplog):
    """ENOSPC while TensorRT streams the engine into the cache: the engine moves to a private file and is used."""
    cache.mkdir()
    with faults.full_disk(cache, 2000):
        made, notices = _lower(caplog)
    assert made == {"built": 1, "cache_hits": 0, "fallbacks": 0}
    assert len(notices) == 1 and "No space left on device" in notices[0] and "without being cached" in notices[0]
    assert os.listdir(cache) == []  # nothing half-written left behind


def test_an_engine_that_cannot_be_written_anywhere_is_the_build_error():
    """Where even the private file is full, the writer's error is what the build reports (TensorRT swallows it)."""
    writer = build_cache.EngineWriter(None)
    writer._file = faults._Filling(writer._file, [10], writer._tmp)  # 10 bytes left where it writes
    assert writer.write(b"x" * 10) == 10 and writer.write(b"y") == 0
    assert writer.error.errno == errno.ENOSPC and writer._tmp in str(writer.error)
    writer.abort()


def test_a_read_only_cache_serves_its_entries_and_builds_the_rest(cache, caplog):
    _lower(caplog)  # stored
    with faults.read_only(cache):
        assert _lower(caplog) == ({"built": 0, "cache_hits": 1, "fallbacks": 0}, [])  # loading writes nothing
        made, notices = _lower(caplog, seed=1)  # another model: a miss
    assert made == {"built": 1, "cache_hits": 0, "fallbacks": 0} and len(notices) == 1, notices
    assert "Read-only file system" in notices[0] and len(os.listdir(cache)) == 1


# ---------------------------------------------------------------------------------- real file systems, where mountable


def _mounted(disk):
    if disk is None:
        pytest.skip("this process may not mount (the injected faults above cover the same paths)")
    return disk


def test_a_save_onto_a_real_full_tmpfs_keeps_the_previous_files(program):
    with faults.tmpfs(32 << 10) as disk:  # one save fits (6 pages), a second beside it does not
        pte = _mounted(disk) / "m.pte"
        saved = write_program(program, pte)
        before = {p: open(p, "rb").read() for p in (saved.path, saved.data_path)}
        with pytest.raises(OSError) as err:
            write_program(program, pte)
        named = [p for p in before if f"cannot write {p}:" in str(err.value)]  # the one it filled in
        assert err.value.errno == errno.ENOSPC and len(named) == 1, err.value
        assert {p: open(p, "rb").read() for p in before} == before and _leftovers(disk) == []
        assert et_tensorrt.Runner(pte, data_path=saved.data_path).run([X])[0].shape == (2, 4)


def test_an_engine_cache_on_a_real_full_tmpfs_builds_with_one_notice(monkeypatch, caplog):
    monkeypatch.setattr(build_cache, "_noticed", set())
    with faults.tmpfs(4 << 10) as disk:
        monkeypatch.setenv(build_cache.ENV_CACHE_DIR, str(_mounted(disk)))
        made, notices = _lower(caplog, seed=2)
        assert made == {"built": 1, "cache_hits": 0, "fallbacks": 0}
        assert len(notices) == 1 and "No space left on device" in notices[0], notices
        assert _leftovers(disk) == [] and not [n for n in os.listdir(disk) if n.endswith(".etrc")]


def test_a_cache_behind_a_real_read_only_mount_serves_its_entries(cache, caplog, monkeypatch):
    _lower(caplog, seed=3)  # stored
    with faults.read_only_mount(cache) as mounted:
        monkeypatch.setenv(build_cache.ENV_CACHE_DIR, str(_mounted(mounted)))
        assert _lower(caplog, seed=3) == ({"built": 0, "cache_hits": 1, "fallbacks": 0}, [])
