"""The debug-handle map preprocess returns (et_tensorrt/backend/debug_handles.py): which source nodes each of the
delegate's ETDump events stands for. Built on edge programs here, no lowering; tests/runtime/test_etrecord.py reads
it back through Inspector."""

import torch
from executorch.exir import to_edge

from et_tensorrt.backend import debug_handles as dh


def _edge(model, *inputs):
    return to_edge(torch.export.export(model.eval(), inputs)).exported_program()


def _handle(program, name: str) -> int:
    return next(n.meta["debug_handle"] for n in program.graph.nodes if n.name == name)


def test_every_event_maps_the_run_to_all_nodes_and_copies_to_the_boundary_nodes():
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    program = _edge(mlp, torch.randn(2, 4))
    mapping = dh.debug_handle_map(program)
    every = tuple(sorted({n.meta["debug_handle"] for n in program.graph.nodes if n.op == "call_function"}))
    assert len(every) == 3  # each Linear's permute and addmm share one handle; the ReLU has its own
    assert set(mapping) == {dh.INIT, dh.INPUTS, dh.OUTPUTS, *dh.EXECUTORS}
    assert mapping[dh.INIT] == mapping["tensorrt"] == mapping["pytorch fallback"] == every
    assert mapping[dh.INPUTS] == (_handle(program, "aten_addmm_default"),)  # the one node that reads x
    assert mapping[dh.OUTPUTS] == (_handle(program, "aten_addmm_default_1"),)


def test_the_outputs_of_a_node_with_several_map_to_it():
    class MaxWithIndex(torch.nn.Module):
        def forward(self, x):
            values, indices = torch.max(x.tanh(), dim=1)
            return values, indices

    program = _edge(MaxWithIndex(), torch.randn(2, 5))
    mapping = dh.debug_handle_map(program)
    (max_node,) = [n for n in program.graph.nodes if "max" in n.name and n.op == "call_function"]
    assert mapping[dh.OUTPUTS] == (max_node.meta["debug_handle"],)
    assert mapping[dh.INPUTS] == (_handle(program, "aten_tanh_default"),)


def test_a_program_without_debug_handles_has_no_map():
    program = _edge(torch.nn.ReLU(), torch.randn(3))
    for node in program.graph.nodes:
        node.meta.pop("debug_handle", None)
    assert dh.debug_handle_map(program) is None


def test_the_init_event_is_named_by_the_partition_when_there_are_several():
    program = _edge(torch.nn.ReLU(), torch.randn(3))
    assert dh.INIT in dh.debug_handle_map(program, 1, 1)
    assert "init 2/3" in dh.debug_handle_map(program, 2, 3) and dh.INIT not in dh.debug_handle_map(program, 2, 3)


def test_each_map_of_a_method_gets_every_partitions_init_entry():
    first = {"init 1/2": (1,), dh.INPUTS: (1,)}
    second = {"init 2/2": (4, 5), dh.INPUTS: (4,)}
    dh.share_init_entries([first, None, second])
    assert first == {"init 1/2": (1,), "init 2/2": (4, 5), dh.INPUTS: (1,)}
    assert second == {"init 1/2": (1,), "init 2/2": (4, 5), dh.INPUTS: (4,)}  # its own copies stay its own
