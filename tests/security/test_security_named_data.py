"""Named data is checked as strictly as the blob (issue 35): every engine and weight a delegate reads from a .ptd
(or the .pte's own named data) is checked against the CRC-32 its blob's NAMED_DATA records, at init, before anything
reads it; a truncated, foreign or unneeded .ptd and a missing one are each one error naming the file, with no
ExecuTorch log line before it. Exact texts: these are the messages users act on."""

from __future__ import annotations

import re
import zlib

import pytest
import torch

import et_tensorrt
from et_tensorrt.errors import RunnerError
from et_tensorrt.format import blob as B
from et_tensorrt.inspection import delegate_blobs, ptd_layout

TRUST = "ET_TENSORRT_TRUST_NAMED_DATA"
LOGS = "ET_TENSORRT_EXECUTORCH_LOGS"


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 8)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


X = torch.randn(4, 16, generator=torch.Generator().manual_seed(0))


def _model(seed: int) -> Mlp:
    torch.manual_seed(seed)
    return Mlp().eval()


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """(a: the MLP with its .ptd, b: another MLP's, plain: one without named data, the blob of a)."""
    folder = tmp_path_factory.mktemp("ptd")
    kwargs = dict(min_block_size=1, cache=False)
    a = et_tensorrt.save(folder / "a.pte", _model(0), (X,), named_data="ptd", **kwargs)
    b = et_tensorrt.save(folder / "b.pte", _model(1), (X,), named_data="ptd", **kwargs)
    plain = et_tensorrt.save(folder / "plain.pte", _model(0), (X,), **kwargs)
    with open(a.path, "rb") as f:
        (blob,) = [B.read_blob(data) for data in delegate_blobs(f.read())]
    return a, b, plain, blob


def _targets(blob) -> list[tuple[B.NamedRef, str]]:
    """Each named datum of the blob and what the delegate's error calls it."""
    out = []
    for ref in blob.named:
        what = "the engine" if ref.target == B.NAMED_ENGINE else f"weight '{blob.weights[ref.index].name}'"
        out.append((ref, f"{what} of partition 1/1 of method 'forward'"))
    return out


def _flipped(saved, tmp_path, key: str, where: float) -> tuple[str, int]:
    """A copy of a's .ptd with one bit flipped at ``where`` (0 first byte, 1 last) of ``key``'s bytes; (its path,
    the CRC-32 of the changed bytes)."""
    a = saved[0]
    data = bytearray(open(a.data_path, "rb").read())
    start, size = ptd_layout(data)[key]
    data[start + round(where * (size - 1))] ^= 0x10
    path = tmp_path / "flipped.ptd"
    path.write_bytes(data)
    return str(path), zlib.crc32(data[start : start + size])


# An ExecuTorch log line: "E 00:00:00.01 executorch:method.cpp:128] ..." (its default), "[method.cpp:128] ..." (its
# Python bindings' format, once they are loaded).
EXECUTORCH_LOG = re.compile(r"\w+\.cpp:\d+\]")


def _no_executorch_log(capfd) -> None:
    err = capfd.readouterr().err
    assert not EXECUTORCH_LOG.search(err), err


def test_lowering_records_each_named_datums_crc32(saved):
    a, _, _, blob = saved
    assert blob.named_digests and len(blob.named) == 5  # the engine, two weights, two biases
    layout = ptd_layout(open(a.data_path, "rb").read())
    data = open(a.data_path, "rb").read()
    for ref in blob.named:
        start, size = layout[ref.key]
        assert size == ref.nbytes and zlib.crc32(data[start : start + size]) == ref.crc32


@pytest.mark.parametrize("where", [0.0, 0.5, 1.0], ids=["first", "middle", "last"])
def test_a_flipped_byte_anywhere_in_an_engine_or_weight_is_one_error_naming_the_ptd(saved, tmp_path, capfd, where):
    a, _, _, blob = saved
    for ref, what in _targets(blob):
        path, actual = _flipped(saved, tmp_path, ref.key, where)
        capfd.readouterr()
        with pytest.raises(RunnerError) as caught:
            et_tensorrt.Runner(a.path, data_path=path).run([X])
        assert str(caught.value) == (
            "cannot load method 'forward' (ExecuTorch error 1): EtTensorRTBackend init: "
            f"named data '{ref.key}' ({what}) fails its digest (crc32 0x{actual:08x}, recorded 0x{ref.crc32:08x}): "
            f"{path} is corrupt; copy the .ptd again or save the model again"
        )
        _no_executorch_log(capfd)


def test_a_truncated_ptd_is_one_error_naming_it(saved, tmp_path, capfd):
    a = saved[0]
    data = open(a.data_path, "rb").read()
    path = tmp_path / "truncated.ptd"
    path.write_bytes(data[:-100])
    with pytest.raises(RunnerError) as caught:
        et_tensorrt.Runner(a.path, data_path=path)
    assert str(caught.value) == (
        f"cannot load data file {path} for program {a.path}: it is truncated (its header declares {len(data)} "
        f"bytes, the file has {len(data) - 100}); copy the .ptd again or save the model again"
    )
    with pytest.raises(RunnerError, match=f"^cannot load data file {path} for program from bytes: it is truncated"):
        et_tensorrt.Runner(open(a.path, "rb").read(), data_path=path)
    _no_executorch_log(capfd)


def test_a_ptd_whose_header_sizes_overflow_is_one_error_naming_it(saved, tmp_path):
    a = saved[0]
    data = bytearray(open(a.data_path, "rb").read())
    data[40:48] = (2**64 - 1).to_bytes(8, "little")  # the segment data size
    path = tmp_path / "overflow.ptd"
    path.write_bytes(data)
    with pytest.raises(RunnerError) as caught:
        et_tensorrt.Runner(a.path, data_path=path)
    assert str(caught.value) == (
        f"cannot load data file {path} for program {a.path}: its header is corrupt (its sizes overflow); copy the "
        ".ptd again or save the model again"
    )


@pytest.mark.parametrize(
    "damage, problem",
    [
        ("root", "its root lies outside it"),
        ("key_length", r"entry \d has no readable key"),
        ("segment_vtable", "segment 0 is damaged"),  # the fuzzer's F10 crash: a table whose vtable lies elsewhere
    ],
)
def test_a_damaged_key_table_is_refused_before_executorch_reads_it(saved, tmp_path, damage, problem):
    """ExecuTorch reads a .ptd's flatbuffer unverified (the fuzzer's flips there crashed it): Runner walks it
    bounds-checked first."""
    a = saved[0]
    data = _damaged_key_table(open(a.data_path, "rb").read(), damage)
    path = tmp_path / "damaged.ptd"
    path.write_bytes(data)
    with pytest.raises(RunnerError) as caught:
        et_tensorrt.Runner(a.path, data_path=path)
    assert re.fullmatch(
        f"cannot load data file {re.escape(str(path))} for program {re.escape(a.path)}: its key table is damaged "
        rf"\({problem}\): the file is corrupt; copy the .ptd again or save the model again",
        str(caught.value),
    ), str(caught.value)


@pytest.mark.parametrize(
    "damage, problem",
    [
        ("key_length", r"entry \d has no readable key"),
        ("segment_vtable", "segment 0 is damaged"),
        ("key_count", "a list ends past it"),
    ],
)
def test_executorchs_own_runtime_never_reads_a_damaged_key_table(saved, tmp_path, damage, problem):
    """Through executorch.runtime, ExecuTorch maps the .ptd itself and reads its flatbuffer unverified on every lookup
    (13 of 200 head mutations crashed it inside FlatTensorDataMap::get_data, issue 45): the delegate's init walks
    the bytes ExecuTorch loaded, bounds-checked, before it asks the map for anything (runtime/data_map_check.h).
    ExecuTorch checks the root offset itself ("root table offset ... is invalid")."""
    from executorch.runtime import Runtime

    from et_tensorrt import _C

    data = _damaged_key_table(open(saved[0].data_path, "rb").read(), damage)
    path = tmp_path / "damaged.ptd"
    path.write_bytes(data)
    with pytest.raises(RuntimeError):
        Runtime.get().load_program(saved[0].path, data_path=str(path)).load_method("forward")
    assert re.fullmatch(
        r"EtTensorRTBackend init: the program's data file \(.ptd\) is corrupt: its key table is damaged "
        rf"\({problem}\), and ExecuTorch would read outside it; copy the .ptd again or save the model again",
        _C.last_delegate_error(),
    ), _C.last_delegate_error()


@pytest.mark.parametrize("first", ["et_tensorrt", "executorch.runtime"])
def test_a_damaged_identifier_through_executorchs_own_runtime_is_an_error_not_an_abort(saved, tmp_path, first):
    """ExecuTorch logs a .ptd's identifier bytes as they are ("FlatTensor identifier 'F\xd401' != expected 'FT01'")
    and its Python bindings' log function aborts the process on a line that is not UTF-8 (14 SIGABRT of 2,000 head
    mutations, issue 45). Importing et_tensorrt, in either order, puts its filter in front: the bytes are escaped."""
    data = bytearray(open(saved[0].data_path, "rb").read())
    assert data[4:8] == b"FT01"
    data[5] ^= 0x80  # "T" -> 0xd4, which starts no UTF-8 sequence here
    path = tmp_path / "identifier.ptd"
    path.write_bytes(data)
    script = f"""
import {first}
import et_tensorrt
from executorch.runtime import Runtime
try:
    Runtime.get().load_program({saved[0].path!r}, data_path={str(path)!r})
except RuntimeError:
    print("refused")
"""
    done = _python(script)
    assert done.returncode == 0 and done.stdout.split() == ["refused"], (done.returncode, done.stdout, done.stderr)
    assert "FlatTensor identifier 'F\\xd401' != expected 'FT01'" in done.stderr, done.stderr


def _python(script: str):
    """``script`` run by a fresh interpreter, ExecuTorch's log lines as a user without LOGS set sees them."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != LOGS}
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env)


def _damaged_key_table(ptd: bytes, damage: str) -> bytes:
    data = bytearray(ptd)
    if damage == "root":
        data[0:4] = (2**32 - 16).to_bytes(4, "little")
    elif damage == "key_length":
        at = data.index(b"et_tensorrt:") - 4  # the first key's u32 length
        data[at : at + 4] = (2**32 - 16).to_bytes(4, "little")
    elif damage == "segment_vtable":
        data[_segment_table(bytes(data), 0) + 3] ^= 0x40  # the high byte of its offset to its vtable
    else:
        at = _key_list(bytes(data)) - 4  # the key list's u32 length
        data[at : at + 4] = (2**31).to_bytes(4, "little")
    return bytes(data)


def _key_list(ptd: bytes) -> int:
    """Where the first entry of a .ptd's key list (flat_tensor.fbs: FlatTensor field 2, NamedData) starts."""
    from flatbuffers.table import Table

    root = Table(ptd, int.from_bytes(ptd[0:4], "little"))
    return root.Vector(root.Offset(8))


def _segment_table(ptd: bytes, index: int) -> int:
    """Where DataSegment ``index``'s table starts in a .ptd (flat_tensor.fbs: FlatTensor field 1 is the segments)."""
    from flatbuffers.table import Table

    root = Table(ptd, int.from_bytes(ptd[0:4], "little"))
    vector = root.Vector(root.Offset(6))
    return root.Indirect(vector + 4 * index)


def test_a_file_that_is_no_ptd_is_one_error_naming_it(saved, capfd):
    a, _, plain, _ = saved
    size = len(open(plain.path, "rb").read())
    with pytest.raises(RunnerError) as caught:
        et_tensorrt.Runner(a.path, data_path=plain.path)
    assert str(caught.value) == (
        f"cannot load data file {plain.path} for program {a.path}: it is not an ExecuTorch data file (.ptd): it has "
        f"no FlatTensor header ({size} bytes)"
    )
    _no_executorch_log(capfd)


def test_another_programs_ptd_is_one_error_naming_both_files(saved, capfd):
    a, b, _, blob = saved
    with pytest.raises(RunnerError) as caught:
        et_tensorrt.Runner(a.path, data_path=b.data_path).run([X])
    assert str(caught.value) == (
        "cannot load method 'forward' (ExecuTorch error 1): EtTensorRTBackend init: the engine of partition 1/1 of "
        f"method 'forward' is ExecuTorch named data '{blob.named_engine.key}', which {b.data_path} does not hold: "
        "that .ptd is not this program's (another program's, or from another save of it); load the .ptd saved with "
        f"{a.path}"
    )
    _no_executorch_log(capfd)


def test_a_ptd_given_to_a_program_without_named_data_is_refused_on_every_call(saved, capfd):
    a, _, plain, _ = saved
    runner = et_tensorrt.Runner(plain.path, data_path=a.data_path)
    expected = (
        f"cannot load method 'forward' of {plain.path} with data file {a.data_path}: the .ptd holds 5 et_tensorrt "
        "engine(s) and weight(s), but this program's delegates keep theirs inside the .pte (it was saved without "
        'named_data="ptd"), so the .ptd is another program\'s; load the program without it, or the .pte saved with it'
    )
    for _ in range(2):  # the method is not left loaded: a second call is refused the same way
        with pytest.raises(RunnerError) as caught:
            runner.run([X])
        assert str(caught.value) == expected
    _no_executorch_log(capfd)
    torch.testing.assert_close(et_tensorrt.Runner(plain.path).run([X])[0], _model(0)(X))  # without it: runs


def test_a_missing_ptd_is_one_error_naming_the_file_to_load(saved, capfd):
    a, _, _, blob = saved
    with pytest.raises(RunnerError) as caught:
        et_tensorrt.Runner(a.path).run([X])
    assert str(caught.value) == (
        "cannot load method 'forward' (ExecuTorch error 1): EtTensorRTBackend init: the engine of partition 1/1 of "
        f"method 'forward' is ExecuTorch named data '{blob.named_engine.key}' kept outside {a.path}, and no .ptd "
        "was given: load the program with its .ptd (et_tensorrt.save writes it beside the .pte): "
        f"Runner('{a.path}', data_path='{a.data_path}'), et-tensorrt run {a.path} --data {a.data_path}"
    )
    _no_executorch_log(capfd)
    with pytest.raises(FileNotFoundError, match="no data file at"):
        et_tensorrt.Runner(a.path, data_path=a.data_path + ".gone")


def test_executorch_log_lines_show_when_asked(saved, capfd, monkeypatch):
    a = saved[0]
    monkeypatch.setenv(LOGS, "1")
    capfd.readouterr()
    with pytest.raises(RunnerError):
        et_tensorrt.Runner(a.path).run([X])
    assert "method.cpp:128] Init failed for backend EtTensorRTBackend" in capfd.readouterr().err


def test_the_right_ptd_runs_and_the_opt_out_skips_the_check(saved, tmp_path, monkeypatch):
    """With ET_TENSORRT_TRUST_NAMED_DATA=1 nothing is checked: a flipped weight bit then changes the output, which
    is what the check is for (files you trust only)."""
    a, _, _, blob = saved
    expected = _model(0)(X)
    torch.testing.assert_close(et_tensorrt.Runner(a.path, data_path=a.data_path).run([X])[0], expected)
    bias = next(r for r in blob.named if r.target == B.NAMED_WEIGHT and blob.weights[r.index].name == "fc2.bias")
    path, _ = _flipped(saved, tmp_path, bias.key, 1.0)  # the last bias's exponent byte
    monkeypatch.setenv(TRUST, "1")
    got = et_tensorrt.Runner(a.path, data_path=path).run([X])[0]
    assert (got - expected).abs().max() > 1e-3
    monkeypatch.setenv(TRUST, "yes")  # exactly 1, nothing else
    with pytest.raises(RunnerError, match="fails its digest"):
        et_tensorrt.Runner(a.path, data_path=path).run([X])


def test_executorchs_own_runtime_is_refused_the_same_way(saved, tmp_path):
    """Through executorch.runtime the delegate knows no file names: the message says which data and what to do."""
    from executorch.runtime import Runtime

    from et_tensorrt import _C

    a, _, _, blob = saved
    path, actual = _flipped(saved, tmp_path, blob.named_engine.key, 0.5)
    program = Runtime.get().load_program(a.path, data_path=path)
    with pytest.raises(RuntimeError):
        program.load_method("forward")
    assert _C.last_delegate_error() == (
        f"EtTensorRTBackend init: named data '{blob.named_engine.key}' (the engine of partition 1/1 of method "
        f"'forward') fails its digest (crc32 0x{actual:08x}, recorded 0x{blob.named_engine.crc32:08x}): the .ptd (or "
        "the .pte) holding it is corrupt; copy it again or save the model again"
    )


def test_a_corrupt_named_engine_never_reaches_tensorrt(saved, tmp_path):
    """On a (fake) GPU the check runs before the engine is deserialized: TensorRT is never handed the bytes."""
    from et_tensorrt.inspection import named_data
    from et_tensorrt.runtime import executors
    from et_tensorrt.testing.fake_gpu import fake_gpu

    a, _, _, blob = saved
    path, _ = _flipped(saved, tmp_path, blob.named_engine.key, 0.5)
    with open(a.path, "rb") as f:
        pte = f.read()
    (data,) = delegate_blobs(pte)
    with fake_gpu("sm86") as seen, pytest.raises(RuntimeError, match="fails its digest"):
        executors.create_executor(data, cuda_devices=1, named_data=named_data(pte, path))
    assert seen.engines == []
    with fake_gpu("sm86") as seen:
        _, choice = executors.create_executor(data, cuda_devices=1, named_data=named_data(pte, a.data_path))
    assert choice["executor"] == "tensorrt" and len(seen.engines) == 1  # the intact one is deserialized


def test_a_blob_written_before_the_digests_still_loads_unchecked(saved, tmp_path):
    """NAMED_DATA layout 0 (no CRC-32 recorded) is still read; its named bytes are checked by size only."""
    from et_tensorrt.inspection import named_data
    from et_tensorrt.runtime import executors

    a, _, _, blob = saved
    with open(a.path, "rb") as f:
        pte = f.read()
    (data,) = delegate_blobs(pte)
    old = [B.NamedRef(n.target, n.index, n.key, n.nbytes) for n in blob.named]
    unchecked = B.replace_sections(data, {B.SECTION_NAMED_DATA: B.encode_named_data(old)})
    assert not B.read_blob(unchecked).named_digests
    path, _ = _flipped(saved, tmp_path, blob.named_engine.key, 0.5)
    _, choice = executors.create_executor(unchecked, cuda_devices=0, named_data=named_data(pte, path))
    assert choice["executor"] == "pytorch"


def test_the_command_line_prints_one_error_line_and_debug_shows_executorchs_log(saved, tmp_path, capfd):
    from et_tensorrt import cli

    a, _, _, blob = saved
    path, actual = _flipped(saved, tmp_path, blob.named_engine.key, 0.5)
    capfd.readouterr()
    assert cli.main(["run", a.path, "--data", path]) == cli.EXIT_ERROR
    assert capfd.readouterr().err == (
        "error: cannot load method 'forward' (ExecuTorch error 1): EtTensorRTBackend init: "
        f"named data '{blob.named_engine.key}' (the engine of partition 1/1 of method 'forward') fails its digest "
        f"(crc32 0x{actual:08x}, recorded 0x{blob.named_engine.crc32:08x}): {path} is corrupt; copy the .ptd again "
        "or save the model again\n"
    )
    with pytest.raises(RunnerError, match="fails its digest"):
        cli.main(["--debug", "run", a.path, "--data", path])
    assert "method.cpp:128] Init failed for backend EtTensorRTBackend" in capfd.readouterr().err
    import os

    assert LOGS not in os.environ  # --debug's switch does not outlive the command


def test_inspect_says_whether_named_data_is_checked(saved):
    from et_tensorrt.inspection import format_delegate, inspect_bytes

    a, _, _, _ = saved
    with open(a.path, "rb") as f:
        info = inspect_bytes(f.read())
    lines = [line for m in info.methods for d in m.delegates for line in format_delegate(d)]
    assert "  named data integrity: each key's CRC-32 recorded, checked at load" in lines


def test_prepare_refuses_a_corrupt_weight_before_building_an_engine_from_it(saved, tmp_path):
    from et_tensorrt.cli.common import CliError
    from et_tensorrt.cli.prepare import _with_named_weights
    from et_tensorrt.inspection import named_data

    a, _, _, blob = saved
    ref = next(r for r in blob.named if r.target == B.NAMED_WEIGHT)
    path, actual = _flipped(saved, tmp_path, ref.key, 0.5)
    with open(a.path, "rb") as f:
        pte = f.read()
    (data,) = delegate_blobs(pte)
    with pytest.raises(CliError) as caught:
        _with_named_weights(B.read_blob(data, copy=False), named_data(pte, path), a.path, path)
    assert str(caught.value) == (
        f"embedded program: weight '{blob.weights[ref.index].name}' is named data '{ref.key}', which fails its "
        f"digest (crc32 0x{actual:08x}, recorded 0x{ref.crc32:08x}): the .ptd (or the .pte) holding it is corrupt; "
        f"copy it again or save the model again ({a.path} with {path})"
    )


def test_executorchs_python_bindings_loaded_later_do_not_bring_the_log_lines_back(saved):
    """ExecuTorch's Python bindings register their own log function when they load; a Runner puts its filter back
    in front of it."""
    a = saved[0]
    script = f"""
import et_tensorrt
for step in ("before", "after"):
    if step == "after":
        import executorch.extension.pybindings.portable_lib  # registers its own log function
    try:
        et_tensorrt.Runner({a.path!r}).run([__import__("torch").zeros(4, 16)])
    except et_tensorrt.RunnerError:
        print(step, "refused")
"""
    done = _python(script)
    assert done.stdout.split() == ["before", "refused", "after", "refused"], done.stdout + done.stderr
    # the bindings' own notice at import that they replaced the log function is theirs; no line of the two loads
    assert "Init failed" not in done.stderr and "backend_interface.cpp" not in done.stderr, done.stderr
    assert done.stderr.count("register_pal()") <= 1, done.stderr  # ours is silent


def test_text_generator_refuses_a_damaged_ptd_before_executorch_reads_it(saved, tmp_path):
    """TextLLMRunner maps the .ptd itself: TextGenerator checks it first, as Runner does."""
    from et_tensorrt.llm import TextGenerator

    a = saved[0]
    data = open(a.data_path, "rb").read()
    path = tmp_path / "truncated.ptd"
    path.write_bytes(data[:-100])
    with pytest.raises(RunnerError) as caught:
        TextGenerator(a.path, a.path, path)  # any file as the tokenizer: the .ptd is refused first
    assert str(caught.value) == (
        f"cannot load data file {path} for program {a.path}: it is truncated (its header declares {len(data)} "
        f"bytes, the file has {len(data) - 100}); copy the .ptd again or save the model again"
    )
