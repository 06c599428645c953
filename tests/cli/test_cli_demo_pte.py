"""`demo` end to end (subprocess), then `inspect` and `run` on the .pte the demo wrote.

One lowering for the whole module: the demo's own (scope="module").
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zlib

import pytest
import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def cli(*args, env_dir, timeout=600):
    env = dict(os.environ, ET_TENSORRT_CACHE_DIR=str(env_dir / "engines"))
    return subprocess.run([sys.executable, "-m", "et_tensorrt", *map(str, args)], capture_output=True,
                          text=True, cwd=REPO, env=env, timeout=timeout)


def error_lines(proc):
    return [line for line in proc.stderr.splitlines() if line.startswith("error")]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("demo")
    pte = tmp / "host_branch.pte"
    proc = cli("demo", "-o", pte, env_dir=tmp)
    return proc, pte, tmp


def test_demo_lowers_runs_and_checks_parity(demo):
    proc, pte, _ = demo
    out = proc.stdout
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "demo passed" in out
    # The placement rule, both views: placed (fake cuda export) and unplaced (host export).
    assert "graph placed" in out and "graph unplaced" in out
    # explain reports the edge program lowering partitions: .to("cpu") is a _to_dim_order_copy there
    assert re.search(
        r"^dim_order_ops__to_dim_order_copy_default\s+dim_order_ops\._to_dim_order_copy\.default\s+cpu\s+"
        r"host: cast:device-change \(cuda:0 -> cpu\)", out, re.M
    )
    assert "host: user:torch_executed_ops (aten.sigmoid.default)" in out
    assert "host: user:torch_executed_ops (aten.cumsum.default)" in out
    # The backend's per-engine progress is shown.
    assert re.search(r"\[et_tensorrt\] engine 1(/1)?: \d+ nodes, onnx", out)
    # Plan and parity table.
    assert re.search(r"input 0\s+share\s+cpu -> cpu\s+0\b", out)
    parity = out[out.index("parity with eager PyTorch"):]
    assert len(re.findall(r"^\s+[01]\s+\(4, 10\)\s+\S+\s+\S+\s+ok$", parity, re.M)) == 2
    assert pte.read_bytes()[4:8] == b"ET12"


def test_inspect_shows_methods_delegates_and_io_table(demo):
    _, pte, tmp = demo
    proc = cli("inspect", pte, env_dir=tmp)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "method 'forward': 1 input(s), 2 output(s), 1 delegate(s) (1 EtTensorRTBackend)" in out
    assert "input  0: float32[4, 16]" in out
    assert "aten::cumsum.out" in out  # the host branch's kernel is outside the delegate
    assert "blob format version 1" in out
    assert "execution device cuda:0" in out

    # The figures agree with the blob itself, read here independently.
    from executorch.exir._serialize._program import deserialize_pte_binary

    from et_tensorrt.blob import read_blob

    program = deserialize_pte_binary(pte.read_bytes()).program
    (delegate,) = program.execution_plan[0].delegates
    blob = read_blob(program.backend_delegate_data[delegate.processed.index].data)
    assert f"TensorRT: {blob.metadata['trt_flavour']} {blob.metadata['trt_version']}, precision fp32" in out
    if blob.engine is not None:
        kib = len(blob.engine) / 1024
        assert f"engine: {kib:,.1f} KiB" in out or f"engine: {len(blob.engine):,} B" in out
    for entry in blob.io:
        row = re.search(rf"^\s+{'input' if entry.role == 0 else 'output'}\s+{re.escape(entry.name)}\s+(\S+)\s+(\S+)\s+(\[.*\])$",
                        out, re.M)
        assert row, entry.name
        assert row.group(2) == entry.device
        assert row.group(3) == "[" + ", ".join(str(d.min) for d in entry.dims) + "]"


def test_inspect_truncated_pte_is_one_error_line(demo, tmp_path):
    _, pte, tmp = demo
    bad = tmp_path / "truncated.pte"
    bad.write_bytes(pte.read_bytes()[:200])  # a real header, a broken body
    proc = cli("inspect", bad, env_dir=tmp)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    (line,) = error_lines(proc)
    assert "could not be parsed as an ExecuTorch program" in line


def test_run_with_inputs_matches_eager(demo, tmp_path):
    from et_tensorrt.examples import host_branch as hb

    _, pte, tmp = demo
    inputs = list(hb.example_inputs())
    torch.save(inputs, tmp_path / "inputs.pt")
    proc = cli("run", pte, "--inputs", tmp_path / "inputs.pt", "--repeat", 3, env_dir=tmp)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "placement plan of the last et_tensorrt delegate call: executor" in out
    assert re.search(r"input 0\s+share", out)
    assert re.search(r"output 0\s+\S.*\s+\d[\d,]*\s", out)
    assert re.search(r"3 calls: median [\d.]+ ms", out)
    with torch.no_grad():
        expected = hb.make_model()(*inputs)
    for i, e in enumerate(expected):
        m = re.search(rf"output {i}: float32\[4, 10\] on cpu  sum=(\S+)  crc32=([0-9a-f]{{8}})", out)
        assert m, out
        assert float(m.group(1)) == pytest.approx(e.double().sum().item(), rel=1e-5, abs=1e-5)
    # The input's checksum is the crc32 of exactly the bytes we saved.
    crc = f"{zlib.crc32(inputs[0].contiguous().view(torch.uint8).numpy().tobytes()):08x}"
    assert f"input  0: float32[4, 16] on cpu" in out and f"crc32={crc}" in out


def test_run_random_inputs_of_the_recorded_shape(demo):
    _, pte, tmp = demo
    proc = cli("run", pte, "--seed", 7, env_dir=tmp)
    assert proc.returncode == 0, proc.stderr
    assert "random inputs (seed 7) of the recorded shapes" in proc.stdout
    assert "input  0: float32[4, 16] on cpu" in proc.stdout
    assert "output 1: float32[4, 10] on cpu" in proc.stdout


def test_run_mismatched_input_shape(demo, tmp_path):
    _, pte, tmp = demo
    torch.save([torch.randn(3, 16)], tmp_path / "wrong.pt")
    proc = cli("run", pte, "--inputs", tmp_path / "wrong.pt", env_dir=tmp)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    (line,) = error_lines(proc)
    assert "input 0: shape (3, 16) does not match the program's (4, 16)" in line
