"""``et-tensorrt lower METHOD=PROGRAM.pt2 ...``: several exported programs become the methods of one program, sharing
their KV cache, engine and weights (docs/stateful-decode.md)."""

from __future__ import annotations

import torch

from et_tensorrt.inspection import inspect_file
from et_tensorrt.testing import decoders


def test_lower_prefill_and_decode_into_one_program(run_cli, tmp_path):
    methods = decoders.prefill_decode(decoders.executorch_llama(dynamic=True))
    for name, program in methods.items():
        torch.export.save(program, tmp_path / f"{name}.pt2")
    pte = tmp_path / "llm.pte"
    result = run_cli(
        "lower", "prefill=prefill.pt2", "decode=decode.pt2", "--cuda-graph", "decode", "-o", pte, cwd=tmp_path
    )
    assert result.status == 0, result.stderr
    assert "CUDA graph for decode" in result.stdout
    assert "method prefill:" in result.stdout and "method decode:" in result.stdout
    blobs = {m.name: m.delegates[0].blob for m in inspect_file(pte).methods if m.delegates}
    assert sorted(blobs) == ["decode", "prefill"]
    assert all(b.metadata["named_data"] == "pte" for b in blobs.values())  # what the methods share, stored once
    assert all(e.methods == ("decode", "prefill") for b in blobs.values() for e in b.states)
    assert blobs["decode"].metadata["engine_shared_with"] == "prefill (engine 1/1)"
    assert blobs["decode"].metadata.get("cuda_graph") is True and "cuda_graph" not in blobs["prefill"].metadata
    # `inspect` shows the state both methods bind, reading the blobs without torch
    shown = run_cli("inspect", pte, cwd=tmp_path, env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert shown.status == 0 and shown.imported_torch() == []
    assert shown.stdout.count("shared by") == 2 and "decode, prefill" in shown.stdout
    # `run` names the methods of a program without forward, and runs the one --method names
    unnamed = run_cli("run", "llm.pte", cwd=tmp_path)
    assert unnamed.status == 2 and unnamed.error_line == (
        "error: llm.pte has no method 'forward' (its methods: decode, prefill): name one with --method (e.g. "
        "--method decode)"
    )
    decoded = run_cli("run", "llm.pte", "--method", "decode", cwd=tmp_path)
    assert decoded.status == 0 and decoded.noise == [], decoded.stderr
    assert "random inputs (seed 0) of the recorded shapes of method 'decode':" in decoded.stdout
    assert "output 0: float32(1, 128)" in decoded.stdout


def test_check_runs_the_method_it_is_told(run_cli, tmp_path):
    """Several METHOD=PROGRAM.pt2 lower into one program, as `lower` takes them; `--method` picks the one checked."""
    torch.manual_seed(0)
    for name, width in (("narrow", 4), ("wide", 8)):
        model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, 2))
        torch.export.save(torch.export.export(model.eval(), (torch.randn(2, width),)), tmp_path / f"{name}.pt2")
    result = run_cli("check", "narrow=narrow.pt2", "wide=wide.pt2", "--method", "wide", cwd=tmp_path)
    assert result.status == 0, result.stderr
    assert "wide = wide.pt2: input float32(2, 8)" in result.stdout
    assert "check passed" in result.stdout


def test_unnamed_and_repeated_methods_are_refused(run_cli, tmp_path):
    program = torch.export.export(torch.nn.Linear(4, 4), (torch.randn(2, 4),))
    torch.export.save(program, tmp_path / "a.pt2")
    unnamed = run_cli("lower", "a.pt2", "decode=a.pt2", "-o", "x.pte", cwd=tmp_path)
    assert unnamed.status == 2
    assert unnamed.error_line == "error: several programs are methods of one: name each one, METHOD=PROGRAM.pt2"
    twice = run_cli("lower", "m=a.pt2", "m=a.pt2", "-o", "x.pte", cwd=tmp_path)
    assert twice.status == 2
    assert twice.error_line == "error: a method is named twice: each METHOD=PROGRAM.pt2 names a method of its own"


def test_a_cuda_graph_for_a_method_the_program_does_not_have_is_refused(run_cli, tmp_path):
    program = torch.export.export(torch.nn.Linear(4, 4), (torch.randn(2, 4),))
    torch.export.save(program, tmp_path / "a.pt2")
    result = run_cli("lower", "a.pt2", "--cuda-graph", "decode", "-o", "x.pte", cwd=tmp_path)
    assert result.status == 2
    assert result.error_line == (
        "error: cuda_graph names 'decode', which the program does not have (its methods: forward)"
    )
