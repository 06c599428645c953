"""The delegate's ETDump events read by executorch.devtools.Inspector with the lowering's ETRecord: each resolves,
through the debug-handle map preprocess returns (et_tensorrt/backend/debug_handles.py), to its own partition's
source ops (issue 52 item 2). Engines run through the delegate's PyTorch fallback here (no GPU)."""

import pytest
import torch
from executorch.devtools import Inspector
from executorch.exir import to_edge_transform_and_lower
from executorch.extension.pybindings.portable_lib import _load_for_executorch

import et_tensorrt
from et_tensorrt.backend import debug_handles
from et_tensorrt.errors import OptionError
from et_tensorrt.partition import TensorRTPartitioner

BACKEND = "EtTensorRTBackend"


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3), torch.nn.Tanh()).eval()


def _profile(tmp_path, pte: bytes, etrecord: str, x: torch.Tensor) -> Inspector:
    """Three calls through ExecuTorch's pybindings with ETDump on, read with the ETRecord."""
    (tmp_path / "m.pte").write_bytes(pte)
    module = _load_for_executorch(str(tmp_path / "m.pte"), enable_etdump=True)
    for _ in range(3):
        module.forward((x,))
    module.write_etdump_result_to_file(str(tmp_path / "e.etdp"))
    return Inspector(etdump_path=str(tmp_path / "e.etdp"), etrecord=etrecord)


def _delegate_events(inspector: Inspector) -> list:
    return [e for b in inspector.event_blocks for e in b.events if e.delegate_debug_identifier is not None]


def _ops(event) -> set[str]:
    return set(event.op_types)


def test_one_partition_events_resolve_to_its_source_ops(tmp_path):
    x = torch.randn(2, 4)
    edge = to_edge_transform_and_lower(
        torch.export.export(_mlp(), (x,)), partitioner=[TensorRTPartitioner()], generate_etrecord=True
    )
    program = edge.to_executorch()
    program.get_etrecord().save(str(tmp_path / "m.etrecord"))
    # the map preprocess returned is the one the program carries for its delegate call
    ((instruction, delegate),) = program.delegate_map["forward"].items()
    assert delegate["name"] == BACKEND
    assert set(delegate["delegate_map"]) == {
        debug_handles.INIT,
        debug_handles.INPUTS,
        debug_handles.OUTPUTS,
        *debug_handles.EXECUTORS,
    }

    events = _delegate_events(_profile(tmp_path, program.buffer, str(tmp_path / "m.etrecord"), x))
    by_name = {e.name: e for e in events}
    assert set(by_name) == {"init", "input copies", "pytorch fallback", "output copies"}
    everything = {"aten.permute_copy.default", "aten.addmm.default", "aten.relu.default", "aten.tanh.default"}
    for event in events:
        assert event.delegate_backend_name == BACKEND
        assert event.name in delegate["delegate_map"]  # every name the runtime logs is a key of the map
    assert _ops(by_name["pytorch fallback"]) == everything == _ops(by_name["init"])
    assert _ops(by_name["input copies"]) == {"aten.permute_copy.default", "aten.addmm.default"}  # the first Linear
    assert _ops(by_name["output copies"]) == {"aten.tanh.default"}
    assert len(by_name["pytorch fallback"].perf_data.raw) == 3


def test_two_partitions_each_resolve_to_their_own_ops_through_lower(tmp_path):
    """et_tensorrt.lower(..., etrecord=path) with the ReLU left on the host: two delegates, each init named."""
    x = torch.randn(2, 4)
    etrecord = tmp_path / "m.etrecord"
    pte = et_tensorrt.lower(_mlp(), (x,), min_block_size=1, torch_executed_ops=["aten.relu.default"], etrecord=etrecord)
    assert etrecord.stat().st_size > 0
    inspector = _profile(tmp_path, pte, str(etrecord), x)
    events = _delegate_events(inspector)
    first_linear = {"aten.permute_copy.default", "aten.addmm.default"}
    runs = sorted((e for e in events if e.name == "pytorch fallback"), key=lambda e: e._instruction_id)
    assert [_ops(e) for e in runs] == [first_linear, first_linear | {"aten.tanh.default"}]
    inits = {e.name: _ops(e) for e in events if e.name.startswith("init")}
    assert inits == {"init 1/2": first_linear, "init 2/2": first_linear | {"aten.tanh.default"}}
    outputs = sorted((e for e in events if e.name == "output copies"), key=lambda e: e._instruction_id)
    assert [_ops(e) for e in outputs] == [first_linear, {"aten.tanh.default"}]
    host = [e for b in inspector.event_blocks for e in b.events if e.name == "native_call_relu.out"]
    assert _ops(host[0]) == {"aten.relu.default"}  # ExecuTorch's own op between them, as before


def test_lower_refuses_an_etrecord_path_it_cannot_write_before_any_work(tmp_path):
    with pytest.raises(OptionError, match="etrecord .* does not exist"):
        et_tensorrt.lower(_mlp(), (torch.randn(2, 4),), etrecord=tmp_path / "missing" / "m.etrecord")
