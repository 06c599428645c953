"""The execution choice is the delegate's (C++), made once at init and carried by every plan: which executor,
on which device, and why — including a partition recorded for a GPU that runs on the host."""

from __future__ import annotations

import pytest
import torch

import et_tensorrt
from et_tensorrt import _C
from et_tensorrt.format import _reader
from et_tensorrt.format import blob as B
from et_tensorrt.runtime import executors


def _variant(mlp_blob: bytes, engine: bytes | None, device_index: int = 0) -> bytes:
    """The MLP's real blob (program and weights) with another ENGINE section and execution device."""
    parsed = _reader.parse_blob(mlp_blob)
    sections = [
        (B.SECTION_IO_TABLE, B.encode_io_table(B.read_blob(mlp_blob).io)),
        (B.SECTION_GRAPH, bytes(parsed["graph"])),
        (B.SECTION_WEIGHTS, bytes(parsed["weights_section"])),
    ]
    if engine is not None:
        sections.append((B.SECTION_ENGINE, engine))
    return B.write_sections(sections, B.DEVICE_CUDA, device_index)


def test_the_plan_says_why_and_where_a_gpu_partition_runs_on_this_host(mlp_tester):
    runner = et_tensorrt.Runner(mlp_tester.pte)
    runner.run(list(mlp_tester.example_inputs))
    (plan,) = runner.last_plans
    assert plan.executor == "pytorch" and plan.execution_device == torch.device("cpu")
    if _C.cuda_device_count() == 0:
        assert plan.executor_reason == "no CUDA device is available; runs on cpu instead of cuda:0"
        assert "executor: no CUDA device is available; runs on cpu instead of cuda:0" in repr(plan)


def test_choice_without_an_engine_on_a_machine_without_cuda(mlp_blob):
    _, choice = executors.create_executor(_variant(mlp_blob, None), cuda_devices=0)
    assert choice == {
        "executor": "pytorch",
        "device": torch.device("cpu"),
        "recorded_device": torch.device("cuda", 0),
        "reason": "the blob carries no engine (its build was left to PyTorch at lowering time); "
        "runs on cpu instead of cuda:0",
        "engine_origin": "",
    }


def test_an_engine_for_a_gpu_this_process_lacks_is_not_tried(mlp_blob):
    _, choice = executors.create_executor(_variant(mlp_blob, b"never deserialized", device_index=1), cuda_devices=1)
    assert choice["executor"] == "pytorch" and choice["device"] == torch.device("cpu")
    assert choice["reason"].startswith("the engine's device cuda:1 is not present (this process has 1 CUDA device(s))")


def test_the_error_policy_refuses_with_the_reason(mlp_blob, monkeypatch):
    monkeypatch.setenv(executors.FALLBACK_ENV, "error")
    with pytest.raises(RuntimeError, match="TensorRT cannot execute this partition here: the blob carries no engine"):
        executors.create_executor(_variant(mlp_blob, None), cuda_devices=0)
