"""The lowered ``.pte`` runs unchanged through ExecuTorch's own Python runtime once ``et_tensorrt`` is
imported (the import registers ``EtTensorRTBackend`` into libexecutorch.so's registry), and the
partition report of the lowering says which nodes went to the delegate.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import torch

from et_tensorrt import compile_specs as cs

SCRIPT = textwrap.dedent(
    """
    import sys
    import torch
    from executorch.runtime import Runtime

    pte = open(sys.argv[1], "rb").read()
    x = torch.load(sys.argv[2])
    program = Runtime.get().load_program(pte)
    try:
        program.load_method("forward")
    except RuntimeError as e:
        print("BEFORE-IMPORT:", e)
    else:
        print("BEFORE-IMPORT: loaded")
    import et_tensorrt  # registers the backend; nothing else changes

    program = Runtime.get().load_program(pte)  # kept alive: ExecuTorch's Method does not own its Program
    out = program.load_method("forward").execute([x])[0]
    torch.save(out, sys.argv[3])
    print("AFTER-IMPORT: ran")
    """
)


def test_pte_needs_only_the_import(mlp_tester, tmp_path):
    pte = tmp_path / "mlp.pte"
    pte.write_bytes(mlp_tester.pte)
    x = torch.randn(2, 8)
    torch.save(x, tmp_path / "x.pt")
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    proc = subprocess.run(
        [sys.executable, str(script), str(pte), str(tmp_path / "x.pt"), str(tmp_path / "out.pt")],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert "BEFORE-IMPORT: Failed to load method forward" in proc.stdout, proc.stdout
    assert f"Backend {cs.BACKEND_ID} is not registered" in proc.stderr
    assert "AFTER-IMPORT: ran" in proc.stdout
    torch.testing.assert_close(torch.load(tmp_path / "out.pt"), mlp_tester.expected([x])[0], rtol=1e-5, atol=1e-6)


def test_the_program_names_our_backend(mlp_tester):
    assert cs.BACKEND_ID.encode() in mlp_tester.pte
    assert b"TensorRTBackend\x00" not in mlp_tester.pte.replace(cs.BACKEND_ID.encode() + b"\x00", b"")


def test_partition_report_names_the_delegated_nodes(mlp_tester, conv_tester):
    report = mlp_tester.report
    assert report.delegated == {
        "aten_permute_copy_default": "et_tensorrt_0",
        "aten_addmm_default": "et_tensorrt_0",
        "aten_relu_default": "et_tensorrt_0",
        "aten_permute_copy_default_1": "et_tensorrt_0",
        "aten_addmm_default_1": "et_tensorrt_0",
    }
    assert report.host_nodes == {}
    text = str(report)
    assert "1 partition(s), 5 node(s) delegated, 0 kept on host" in text
    for name in report.delegated:
        assert name in text
    conv = conv_tester.report
    assert {n for n in conv.delegated if n.startswith("aten_convolution")} == {
        "aten_convolution_default",
        "aten_convolution_default_1",
    }
