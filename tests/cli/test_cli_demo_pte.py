"""`demo` end to end (run_cli, without -o: it must leave nothing behind), then `inspect` and `run` on the
host-branch example lowered once in-process."""

from __future__ import annotations

import re
import zlib

import pytest
import torch

from et_tensorrt.examples import host_branch as hb


@pytest.fixture(scope="module")
def demo(tmp_path_factory, run_cli):
    tmp = tmp_path_factory.mktemp("demo")
    temp_root = tmp / "tmpdir"
    temp_root.mkdir()
    # a build cache of its own: its progress line is a build's (a hit would say "from the build cache")
    result = run_cli("demo", cwd=tmp, env={"TMPDIR": str(temp_root), "ET_TENSORRT_CACHE_DIR": str(tmp / "engines")})
    return result, temp_root


@pytest.fixture(scope="module")
def pte(tmp_path_factory):
    import et_tensorrt

    path = tmp_path_factory.mktemp("pte") / "host_branch.pte"
    path.write_bytes(et_tensorrt.lower(hb.export_on_host(), torch_executed_ops=hb.TORCH_EXECUTED_OPS))
    return path


def test_demo_lowers_runs_and_checks(demo):
    result, temp_root = demo
    out = result.stdout
    assert result.status == 0, result.stdout + result.stderr
    assert result.noise == []  # no third-party noise, no native cpuinfo lines: notices only
    assert "demo passed" in out
    # The placement rule, both views: placed (fake cuda export) and unplaced (host export).
    assert "graph placed" in out and "graph unplaced" in out
    # explain reports the program lowering partitions (the edge program): .to("cpu") is a _to_dim_order_copy
    assert re.search(
        # long names are elided in the middle ("~") so each row fits the terminal; the reason wraps beneath
        r"^dim_order_ops__to_dim_order~_default\s+dim_order_ops\._to_dim_order~\.default\s+cpu\s*\n"
        r"\s+host: cast:device-change \(cuda:0 -> cpu\)$",
        out,
        re.M,
    )
    assert re.search(
        r"^aten_sigmoid_default\s+aten\.sigmoid\.default\s+cpu\s+host: user:torch_executed_ops$", out, re.M
    )
    # cumsum is in the supported table: only torch_executed_ops keeps it on the host
    assert re.search(r"^aten_cumsum_default\s+aten\.cumsum\.default\s+cpu\s+host: user:torch_executed_ops$", out, re.M)
    assert re.search(r"\[et_tensorrt\] engine 1/1: \d+ nodes, onnx", result.stderr)  # progress, on stderr
    assert re.search(r"input 0\s+share\s+cpu -> cpu\s+0\b", out)
    assert re.search(r"^\s+engine 1/1\s+\S+\s+\S+\s+\S+\s+ok$", out, re.M)
    parity = out[out.index("the program's outputs as run here") :]
    assert len(re.findall(r"^\s+[01]\s+\(4, 10\)\s+\S+\s+\S+\s+ok$", parity, re.M)) == 2
    # Without -o nothing is written: no temporary folder or program is left behind.
    assert [p for p in temp_root.rglob("*") if p.suffix == ".pte" or p.name.startswith("et_tensorrt")] == []


def test_demo_reports_fit_100_columns(demo):
    out = demo[0].stdout
    reports = re.findall(r"^et_tensorrt partition report.*?(?=\n\n)", out, re.M | re.S)
    assert len(reports) == 2
    assert all(len(line) <= 100 for report in reports for line in report.splitlines())


def test_inspect_shows_methods_delegates_and_io_table(pte, run_cli):
    result = run_cli("inspect", pte, cwd=pte.parent)
    assert result.status == 0 and result.stderr == ""
    out = result.stdout
    assert "method 'forward': 1 input(s), 2 output(s), 1 delegate(s) (1 EtTensorRTBackend)" in out
    assert "input  0: float32(4, 16)" in out
    assert "aten::cumsum.out" in out  # the host branch's kernel is outside the delegate
    assert "blob format version 3" in out
    assert "integrity: every section matches its CRC-32 (DIGESTS)" in out
    assert "embedded program: graph" in out and "(raw, no pickle)" in out
    assert "execution device cuda:0" in out

    # The figures agree with the blob itself, read here independently.
    from et_tensorrt.format.blob import read_blob
    from et_tensorrt.inspection import delegate_blobs

    (data,) = delegate_blobs(pte.read_bytes())
    blob = read_blob(data)
    assert f"TensorRT: {blob.metadata['trt_flavour']} {blob.metadata['trt_version']}, precision fp32" in out
    if blob.engine is not None:
        kib = len(blob.engine) / 1024
        assert f"engine: {kib:,.1f} KiB" in out or f"engine: {len(blob.engine):,} B" in out
    for entry in blob.io:
        role = "input" if entry.role == 0 else "output"
        row = re.search(rf"^\s+{role}\s+{re.escape(entry.name)}\s+(\S+)\s+(\w+)\((.*)\)$", out, re.M)
        assert row, entry.name
        assert row.group(1) == entry.device
        assert row.group(3) == ", ".join(str(d.min) for d in entry.dims)


def test_inspect_reads_the_blobs_without_torch(pte, run_cli):
    """The blob reader `inspect` uses (et_tensorrt.format._reader) links no torch: the command never imports it."""
    result = run_cli("inspect", pte, cwd=pte.parent, env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert result.status == 0, result.stderr[-2000:]
    assert "et_tensorrt.format._reader" in result.imported and result.imported_torch() == []
    assert "blob format version 3" in result.stdout and "input   arg_0" in result.stdout


@pytest.mark.parametrize(
    "cut, says",
    [
        (200, "200 bytes, but its header says the program is"),  # a real header, a broken body
        (28, "28 bytes, which ends inside ExecuTorch's 32-byte extended header"),  # the header itself cut
    ],
)
def test_inspect_truncated_pte_is_one_error_line(pte, tmp_path, run_cli, cut, says):
    (tmp_path / "truncated.pte").write_bytes(pte.read_bytes()[:cut])
    result = run_cli("inspect", "truncated.pte", cwd=tmp_path)
    assert result.status == 1
    assert f"truncated.pte is truncated: {says}" in result.error_line
    assert "write or copy the .pte again" in result.error_line


def test_run_with_inputs_matches_eager(pte, tmp_path, run_cli):
    inputs = list(hb.example_inputs())
    torch.save(inputs, tmp_path / "inputs.pt")
    result = run_cli("run", pte, "--inputs", "inputs.pt", "--repeat", 3, cwd=tmp_path)
    assert result.status == 0 and result.noise == []
    out = result.stdout
    assert "placement plan of the call: 1 delegate call, executor" in out
    assert re.search(r"input 0\s+share", out)
    assert re.search(r"output 0\s+\S.*\s+\d[\d,]*\s", out)
    assert re.search(r"median of 3 calls after 1 warm-up: [\d.]+ ms", out)
    with torch.no_grad():
        expected = hb.make_model()(*inputs)
    for i, e in enumerate(expected):
        m = re.search(rf"output {i}: float32\(4, 10\) on cpu  sum=(\S+)  crc32=([0-9a-f]{{8}})", out)
        assert m, out
        assert float(m.group(1)) == pytest.approx(e.double().sum().item(), rel=1e-5, abs=1e-5)
    # The input's checksum is the crc32 of exactly the bytes we saved.
    crc = f"{zlib.crc32(inputs[0].contiguous().view(torch.uint8).numpy().tobytes()):08x}"
    assert "input  0: float32(4, 16) on cpu" in out and f"crc32={crc}" in out


def test_run_random_inputs_of_the_recorded_shape(pte, run_cli):
    result = run_cli("run", pte, "--seed", 7, cwd=pte.parent)
    assert result.status == 0, result.stderr
    assert "random inputs (seed 7) of the recorded shapes" in result.stdout
    assert "input  0: float32(4, 16) on cpu" in result.stdout
    assert "output 1: float32(4, 10) on cpu" in result.stdout


def test_run_mismatched_input_shape(pte, tmp_path, run_cli):
    torch.save([torch.randn(3, 16)], tmp_path / "wrong.pt")
    result = run_cli("run", pte, "--inputs", "wrong.pt", cwd=tmp_path)
    assert result.status == 1
    assert result.error_line == (
        "error: input 0 of method 'forward' has shape (3, 16) but the program takes (4, 16): dims exported as "
        "static cannot change (export with dynamic_shapes for the dims that vary) (ExecuTorch error 16)"
    )
