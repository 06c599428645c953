"""Checks of a delegate blob against the partition it was built from (the backend tests' contract checks)."""

from __future__ import annotations

import torch
from torch.export.graph_signature import InputKind, OutputKind

from et_tensorrt import compile_specs as cs
from et_tensorrt import trt
from et_tensorrt.embedded_program import load_program
from et_tensorrt.format import blob as B

# What TensorRT writes at offset 0 of a serialized engine (TensorRT-RTX 1.7: b"vtrt"; TensorRT 10: b"ftrt").
ENGINE_MAGIC = {"tensorrt_rtx": b"vtrt", "tensorrt": b"ftrt"}


def lowered_blobs(edge) -> list[tuple[B.Blob, torch.export.ExportedProgram]]:
    """``[(blob, partition ExportedProgram)]`` of an edge program manager, in graph order."""
    from executorch.exir.lowered_backend_module import get_lowered_submodules

    out = []
    for _name, lm, _node in get_lowered_submodules(edge.exported_program().graph_module):
        assert lm.backend_id == cs.BACKEND_ID
        out.append((B.read_blob(lm.processed_bytes), lm.original_module))
    return out


def check_blob(blob, partition, *, expect_engine: bool = True):
    """The blob's I/O table against the partition, the engine's origin, the validation record; returns the
    blob's embedded program, loaded by the safe loader."""
    sig = partition.graph_signature
    user_inputs = [s.arg.name for s in sig.input_specs if s.kind == InputKind.USER_INPUT]
    placeholders = {n.name: n for n in partition.graph.nodes if n.op == "placeholder"}
    out_node = next(n for n in partition.graph.nodes if n.op == "output")
    user_outputs = [v for v, s in zip(out_node.args[0], sig.output_specs) if s.kind == OutputKind.USER_OUTPUT]
    assert len(blob.inputs) == len(user_inputs), "weights/constants must not be engine inputs"
    assert len(blob.outputs) == len(user_outputs)
    assert blob.io == blob.inputs + blob.outputs, "inputs first, then outputs"
    values = [placeholders[n].meta["val"] for n in user_inputs] + [o.meta["val"] for o in user_outputs]
    for entry, val in zip(blob.inputs + blob.outputs, values):
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


def run_program(program, args) -> tuple:
    """An ExportedProgram run eagerly, its outputs as a tuple."""
    with torch.no_grad():
        out = program.module()(*args)
    return out if isinstance(out, (tuple, list)) else (out,)
