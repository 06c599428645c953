"""Shared helpers for the backend tests: lowering, blob extraction, checks against the partition."""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from executorch.exir import to_edge_transform_and_lower
from executorch.exir.lowered_backend_module import get_lowered_submodules
from torch.export.graph_signature import InputKind, OutputKind

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import SplitPartitioner  # noqa: E402

from et_tensorrt import compile_specs as cs  # noqa: E402
from et_tensorrt import blob as B  # noqa: E402
from et_tensorrt import trt  # noqa: E402
from et_tensorrt.embedded_program import load_program  # noqa: E402

# What TensorRT writes at offset 0 of a serialized engine (TensorRT-RTX 1.7: b"vtrt"; TensorRT 10: b"ftrt").
ENGINE_MAGIC = {"tensorrt_rtx": b"vtrt", "tensorrt": b"ftrt"}


def lower(model, args, dynamic_shapes=None, options=None, host_ops=()):
    ep = torch.export.export(model.eval(), args, dynamic_shapes=dynamic_shapes)
    edge = to_edge_transform_and_lower(ep, partitioner=[SplitPartitioner(options, host_ops)])
    return edge


def lowered(edge):
    """[(blob, partition ExportedProgram)] in graph order."""
    out = []
    for _name, lm, _node in get_lowered_submodules(edge.exported_program().graph_module):
        assert lm.backend_id == cs.BACKEND_ID
        out.append((B.read_blob(lm.processed_bytes), lm.original_module))
    return out


def check_blob(blob, partition, *, expect_engine=True):
    """The blob's I/O table against the partition, the engine's origin, the validation record."""
    sig = partition.graph_signature
    user_inputs = [s.arg.name for s in sig.input_specs if s.kind == InputKind.USER_INPUT]
    placeholders = {n.name: n for n in partition.graph.nodes if n.op == "placeholder"}
    out_node = next(n for n in partition.graph.nodes if n.op == "output")
    user_outputs = [v for v, s in zip(out_node.args[0], sig.output_specs) if s.kind == OutputKind.USER_OUTPUT]
    assert len(blob.inputs) == len(user_inputs), "weights/constants must not be engine inputs"
    assert len(blob.outputs) == len(user_outputs)
    assert blob.io == blob.inputs + blob.outputs, "inputs first, then outputs"
    for entry, val in zip(blob.inputs + blob.outputs, [placeholders[n].meta["val"] for n in user_inputs] + [o.meta["val"] for o in user_outputs]):
        assert entry.dtype == B.scalar_type_code(val.dtype), (entry, val.dtype)
        assert len(entry.dims) == val.dim()
        assert entry.device == str(val.device) or (entry.device == "cpu" and val.device.type == "cpu")
        for r, size in zip(entry.dims, val.shape):
            if isinstance(size, int):
                assert r.min == r.opt == r.max == size
            else:
                # engine inputs: profile min >= 1; outputs of data-dependent size may be empty
                assert r.min >= (1 if entry.role == B.ROLE_INPUT else 0)
                assert r.min <= r.opt and (r.max == -1 or r.opt <= r.max)
    assert len({e.name for e in blob.io}) == len(blob.io)
    assert (blob.exec_device_type, blob.exec_device_index) == (1, 0)
    if expect_engine:
        assert blob.engine, "engine section missing"
        assert blob.engine[:4] == ENGINE_MAGIC[trt.flavour()], blob.engine[:16]
        assert len(blob.engine) > 1024
        assert blob.metadata["trt_flavour"] == trt.flavour()
        errors = blob.metadata["validation_max_abs_error"]
        assert set(errors) == {e.name for e in blob.outputs}
    # the embedded program loads (safe loader: GRAPH + WEIGHTS, no pickle) with the same signature
    assert blob.version == B.VERSION and blob.graph is not None and blob.program is None
    program = load_program(blob)
    assert len([s for s in program.graph_signature.input_specs if s.kind == InputKind.USER_INPUT]) == len(user_inputs)
    for node in program.graph.nodes:
        if node.op == "call_function":
            assert "dim_order_ops" not in str(node.target), node.target
            assert "Edge" not in type(node.target).__name__, node.target
    return program


def run_program(program, args):
    with torch.no_grad():
        out = program.module()(*args)
    return out if isinstance(out, (tuple, list)) else (out,)
