"""Issue 38's table, one row a test: what a new user's first tries get back. `run` finds the .ptd beside the
.pte (or names it), an input's dtype is named as the input summary names it, `lower`/`check` of a .pte say what
to do with it, `generate` refuses a program that is not an LLM at once, and notices stay off stdout."""

from __future__ import annotations

import shutil

import pytest
import torch

import et_tensorrt


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """net.pt2; net.pte (its engine and weights in net.ptd beside it); x64.pt, a float64 input."""
    tmp = tmp_path_factory.mktemp("answers")
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()).eval()
    program = torch.export.export(model, (torch.randn(2, 4),))
    torch.export.save(program, tmp / "net.pt2")
    et_tensorrt.save(tmp / "net.pte", program, min_block_size=1, named_data="ptd")
    torch.save(torch.randn(2, 4, dtype=torch.float64), tmp / "x64.pt")
    return tmp


def test_run_finds_the_ptd_beside_the_pte(folder, run_cli):
    result = run_cli("run", "net.pte", cwd=folder)
    assert result.status == 0, result.stderr
    assert "note: named data from net.ptd, the .ptd beside the program (--data names another)" in result.stderr_lines
    assert "placement plan of the call: 1 delegate call" in result.stdout


def test_run_without_its_ptd_names_the_path_it_looked_for(folder, tmp_path, run_cli):
    shutil.copy(folder / "net.pte", tmp_path / "net.pte")
    result = run_cli("run", "net.pte", cwd=tmp_path)
    assert result.status == 1
    line = result.error_line
    assert "no .ptd was given" in line
    assert line.endswith("; no net.ptd lies beside the program (give its .ptd with --data)")


def test_input_dtype_is_named_as_the_summary_names_it(folder, run_cli):
    result = run_cli("run", "net.pte", "--inputs", "x64.pt", cwd=folder)
    assert result.status == 1
    assert "  input  0: float64(2, 4) on cpu" in result.stdout
    assert result.stderr_lines[-1] == (
        "error: input 0 of method 'forward' is float64(2, 4) but the program takes float32(2, 4): convert it "
        "(tensor.to(torch.float32))"
    )


@pytest.mark.parametrize("command", [("lower", "net.pte", "-o", "again.pte"), ("check", "net.pte")])
def test_lower_or_check_of_a_pte_says_what_to_do(folder, run_cli, command):
    result = run_cli(*command, cwd=folder)
    assert result.status == 1
    assert result.error_line == (
        "error: 'net.pte' is already an ExecuTorch program (.pte), lowered before: `et-tensorrt run net.pte` runs "
        "it, `et-tensorrt inspect net.pte` shows what it holds; this command takes a torch.export.save program (.pt2)"
    )
    assert not (folder / "again.pte").exists()


def test_generate_refuses_a_program_without_llm_methods(folder, run_cli):
    result = run_cli("generate", "net.pte", "--tokenizer", "net.pt2", "--prompt", "hi", cwd=folder)
    assert result.status == 1 and result.stdout == ""
    assert result.error_line == (
        "error: net.pte is not an LLM program `generate` can run: it has no method(s) get_max_seq_len, "
        "get_max_context_len, get_vocab_size, get_bos_id, get_eos_ids, use_kv_cache, enable_dynamic_shape (it has "
        "forward); lower it with constant_methods=et_tensorrt.llm.llm_methods(...)"
    )


def test_notices_go_to_stderr_and_results_to_stdout(folder, run_cli):
    result = run_cli("run", "net.pte", "--data", "net.ptd", cwd=folder)
    assert result.status == 0 and result.noise == [], result.stderr
    assert "[et_tensorrt]" not in result.stdout and "note:" not in result.stdout
    if not torch.cuda.is_available():
        assert any("runs with PyTorch on cpu" in line for line in result.stderr_lines), result.stderr
