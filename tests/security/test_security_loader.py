"""The safe loader on its own (no lowering, no TensorRT): what it loads, and what it refuses by name.

Programs here come straight from ``torch.export.export`` (aten ops the partitioner delegates), written by
the same writer preprocess uses; each refusal case edits the written JSON the way a hostile file would.
"""

from __future__ import annotations

import io
import json
import zipfile

import crafted
import pytest
import torch

from et_tensorrt.embedded_program import load_program, serialize_program
from et_tensorrt.embedded_program.allowed_ops import allowed_targets, unsafe_reason
from et_tensorrt.errors import ProgramRefusedError
from et_tensorrt.format import blob as B


class Net(torch.nn.Module):
    """Parameters, a persistent and a non-persistent buffer, a lifted constant, a dynamic batch."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)
        self.register_buffer("scale", torch.full((4,), 2.0))
        self.register_buffer("shift", torch.arange(4.0), persistent=False)

    def forward(self, x):
        return torch.relu(self.fc(x)) * self.scale + self.shift + torch.tensor([1.0, 0.0, 0.0, 1.0])


IO = [
    B.IOEntry(B.ROLE_INPUT, "x", 6, (B.DimRange(1, 2, 16), B.DimRange.static(8))),
    B.IOEntry(B.ROLE_OUTPUT, "y", 6, (B.DimRange(1, 2, 16), B.DimRange.static(4))),
]


@pytest.fixture(scope="module")
def program():
    torch.manual_seed(0)
    model = Net().eval()
    batch = torch.export.Dim("batch", min=1, max=16)
    ep = torch.export.export(model, (torch.randn(2, 8),), dynamic_shapes={"x": {0: batch}}).run_decompositions({})
    graph, weights = serialize_program(ep)
    return model, graph, weights


def blob_with(graph: bytes, weights, *, edit=None) -> bytes:
    if edit is not None:
        doc = json.loads(graph)
        edit(doc)
        graph = json.dumps(doc).encode()
    return B.write_blob(IO, graph=graph, weights=weights, exec_device_type=B.DEVICE_CPU)


def load(data: bytes):
    return load_program(B.read_blob(data))


def test_the_written_program_loads_and_computes_what_the_model_does(program):
    model, graph, weights = program
    assert {w.kind for w in weights} == {"parameter", "buffer", "constant"}
    assert b"stack_trace" not in graph, "node metadata is not written"
    module = load(blob_with(graph, weights)).module(check_guards=False)
    for batch in (1, 5):
        x = torch.randn(batch, 8)
        torch.testing.assert_close(module(x), model(x))


def test_module_names_with_a_dash_load():
    """torchvision's regnet names its blocks ``block1-0``: a legal module name, written quoted by torch.fx."""
    trunk = torch.nn.Module()
    trunk.add_module("block1-0", torch.nn.Linear(8, 4))
    model = torch.nn.Sequential(trunk).eval()
    model.forward = lambda x: getattr(trunk, "block1-0")(x)
    ep = torch.export.export(model, (torch.randn(2, 8),)).run_decompositions({})
    graph, weights = serialize_program(ep)
    assert any("block1-0" in w.name for w in weights)
    x = torch.randn(2, 8)
    torch.testing.assert_close(load(blob_with(graph, weights)).module()(x), model(x))


def test_expressions_torch_writes_are_accepted(program):
    _, graph, _ = program
    assert "Symbol(" in graph.decode(), "the dynamic batch is written as an srepr expression"


def _nodes(doc):
    return doc["graph_module"]["graph"]["nodes"]


def _input_meta(doc):
    return doc["graph_module"]["graph"]["tensor_values"][crafted._user_input(doc)]


REFUSALS = {
    "expression_eval": (lambda d: crafted.with_expression(d, "open('/tmp/x', 'w')"), "torch would eval it"),
    "expression_import": (lambda d: crafted.with_expression(d, "__import__('os')"), "expression"),
    "expression_power": (lambda d: crafted.with_expression(d, "Pow(Integer(10), Integer(999999999))"), "Pow"),
    "expression_symbol_name": (lambda d: crafted.with_expression(d, "Symbol('__class__')"), "shape symbol"),
    "target_callable": (lambda d: _nodes(d)[0].update(target="torch.save"), "not an op et_tensorrt delegates"),
    "target_as_strided": (lambda d: _nodes(d)[0].update(target="torch.ops.aten.as_strided.default"), "not an op"),
    "target_in_place": (lambda d: _nodes(d)[0].update(target="torch.ops.aten.add_.Tensor"), "not an op"),
    "target_higher_order": (lambda d: _nodes(d)[0].update(target="torch.ops.higher_order.cond"), "not an op"),
    "target_extension": (lambda d: _nodes(d)[0].update(target="#ns:op"), "not an op"),
    "node_name_code": (lambda d: _nodes(d)[0].update(name="x = open('/tmp/x')"), "not an identifier"),
    "node_name_reserved": (lambda d: _nodes(d)[0]["outputs"][0]["as_tensor"].update(name="torch"), "reserved"),
    "operator_argument": (
        lambda d: _nodes(d)[0]["inputs"].append({"name": "fn", "arg": {"as_operator": "torch.save"}, "kind": 2}),
        "as_operator",
    ),
    "graph_argument": (
        lambda d: _nodes(d)[0]["inputs"].append(
            {
                "name": "g",
                "arg": {"as_graph": {"name": "g", "graph": json.loads(json.dumps(d["graph_module"]["graph"]))}},
                "kind": 1,
            }
        ),
        "as_graph",
    ),
    "custom_object_value": (
        lambda d: d["graph_module"]["graph"]["custom_obj_values"].update(
            obj={"name": "obj", "class_fqn": "__torch__.x"}
        ),
        "custom object 'obj'",
    ),
    "custom_object_input": (
        lambda d: d["graph_module"]["signature"]["input_specs"].insert(
            0, {"custom_obj": {"arg": {"name": "obj", "class_fqn": "x"}, "custom_obj_name": "obj"}}
        ),
        "custom object 'obj'",
    ),
    "token_input": (
        lambda d: d["graph_module"]["signature"]["input_specs"].insert(0, {"token": {"arg": {"name": "tok"}}}),
        "tokens",
    ),
    "weight_path_code": (
        lambda d: next(s for s in d["graph_module"]["signature"]["input_specs"] if "parameter" in s)[
            "parameter"
        ].update(parameter_name='fc") or open("x'),
        "dotted module path",
    ),
    "treespec_enum": (
        lambda d: d["graph_module"]["module_call_graph"][0]["signature"].update(
            in_spec=json.dumps(
                [
                    1,
                    {
                        "type": "builtins.dict",
                        "context": json.dumps([{"__enum__": True, "fqn": "os:x", "name": "y"}]),
                        "children_spec": [{"type": None, "context": None, "children_spec": []}],
                    },
                ]
            )
        ),
        "treespec",
    ),
    "treespec_type": (
        lambda d: d["graph_module"]["module_call_graph"][0]["signature"].update(
            in_spec=json.dumps([1, {"type": "collections.namedtuple", "context": "null", "children_spec": []}])
        ),
        "treespec type",
    ),
    "guards_code": (lambda d: d.update(guards_code=["import os"]), "guards_code"),
    "verifiers": (lambda d: d.update(verifiers=["EDGE"]), "verifier"),
    "schema_version": (lambda d: d.update(schema_version={"major": 1, "minor": 0}), "schema"),
    "namedtuple_fields": (
        lambda d: d["graph_module"].update(treespec_namedtuple_fields={"x": {"field_names": []}}),
        "named tuples",
    ),
    "range_symbol": (
        lambda d: d["range_constraints"].update({"u99999999999": {"min_val": 0, "max_val": 1}}),
        "shape symbol",
    ),
    "device": (lambda d: _input_meta(d)["device"].update(type="meta"), "neither cpu nor cuda"),
    "layout": (lambda d: _input_meta(d).update(layout=1), "not strided"),
    "dtype": (lambda d: _input_meta(d).update(dtype=99), "dtype code"),
    "negative_size": (lambda d: _input_meta(d)["sizes"].__setitem__(1, {"as_int": -8}), "not an integer in"),
    "huge_int": (
        lambda d: _nodes(d)[0]["inputs"].append({"name": "n", "arg": {"as_int": 2**70}, "kind": 2}),
        "not an integer in",
    ),
    "wrong_type": (lambda d: _nodes(d)[0].update(inputs={"not": "a list"}), "GRAPH"),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_hostile_json_is_refused_by_name(program, case):
    _, graph, weights = program
    edit, fragment = REFUSALS[case]
    with pytest.raises(ProgramRefusedError, match=fragment.replace("(", r"\(")):
        load(blob_with(graph, weights, edit=edit))


@pytest.mark.parametrize("text", [b"\xff\xfe", b"[]", b"{", b'{"graph_module": 3}', b"[" * 100000 + b"]" * 100000])
def test_malformed_graph_json_is_refused(program, text):
    with pytest.raises(ProgramRefusedError, match="GRAPH"):
        load(B.write_blob(IO, graph=text, weights=program[2], exec_device_type=B.DEVICE_CPU))


def _rename(weights, i, name=None, kind=None, tensor=None, persistent=True):
    out = list(weights)
    w = out[i]
    out[i] = B.Weight(name or w.name, kind or w.kind, w.tensor if tensor is None else tensor, persistent)
    return out


def test_weights_must_match_the_graph(program):
    _, graph, weights = program
    cases = {
        "has no stored tensor": weights[1:],
        "unknown entry": list(weights) + [B.Weight("extra", "parameter", torch.zeros(1))],
        "is stored as a buffer": _rename(weights, 0, kind="buffer"),
        "float16": _rename(weights, 0, tensor=weights[0].tensor.half()),
        "has shape": _rename(weights, 0, tensor=torch.zeros(4, 9)),
        "other than 0 and 1": _rename(weights, 0, tensor=torch.full((4, 8), 2, dtype=torch.uint8).view(torch.bool)),
    }
    for fragment, ws in cases.items():
        with pytest.raises(ProgramRefusedError, match=fragment):
            load(blob_with(graph, ws))


# ------------------------------------------------------------------------------ version-1 archives


def _archive(program_ep) -> bytes:
    buf = io.BytesIO()
    torch.export.save(program_ep, buf)
    return crafted.rewrite_archive(buf.getvalue(), lambda e: e.__setitem__("data/sample_inputs/model.pt", b""))


@pytest.fixture(scope="module")
def v1_archive(program):
    model, graph, weights = program
    return _archive(load(blob_with(graph, weights)))


def _v1(archive: bytes) -> bytes:
    return B.write_sections(
        [(B.SECTION_IO_TABLE, B.encode_io_table(IO)), (B.SECTION_PROGRAM, archive)], 0, 0, version=1, alignment=1
    )


def test_a_version_1_archive_loads(program, v1_archive):
    model = program[0]
    module = load(_v1(v1_archive)).module(check_guards=False)
    x = torch.randn(3, 8)
    torch.testing.assert_close(module(x), model(x))


def test_version_1_archive_damage_is_refused_by_name(v1_archive):
    def with_entry(name, data=b"x"):
        return crafted.rewrite_archive(v1_archive, lambda e: e.__setitem__(name, data))

    zf = zipfile.ZipFile(io.BytesIO(v1_archive))
    deflated = io.BytesIO()
    with zipfile.ZipFile(deflated, "w", zipfile.ZIP_DEFLATED) as zo:
        for name in zf.namelist():
            zo.writestr(name, zf.read(name))
    cases = {
        "not a readable zip": v1_archive[: len(v1_archive) // 2],
        "compressed": deflated.getvalue(),
        "unknown entry": with_entry("extra/notes.txt"),
        "legacy format": with_entry("data/weights/model.pt"),
        "not exactly models/model.json": with_entry("models/other.json", b"{}"),
        "single root folder": v1_archive.replace(b"archive/models/model.json", b"archivX/models/model.json"),
    }
    for fragment, archive in cases.items():
        with pytest.raises(ProgramRefusedError, match=fragment):
            load(_v1(archive))


# --------------------------------------------------------------------------------- the allowlist


def test_allowed_targets_are_derived_from_the_partitioner_table():
    from et_tensorrt.partition.supported_ops import SUPPORTED_OPS

    allowed = allowed_targets()
    for name in SUPPORTED_OPS:
        if name.startswith("aten."):
            op = getattr(getattr(torch.ops.aten, name.split(".")[1]), name.split(".")[2])
            assert f"torch.ops.{name}" in allowed or unsafe_reason(op), name  # allowed, or refused for a reason
    assert "torch.ops.aten._unsafe_view.default" in allowed  # a checked view, despite its name
    assert "torch.ops.aten.select.int" in allowed  # the view form of the edge op select_copy
    assert "torch.ops.aten.avg_pool2d.default" in allowed and "_operator.mul" in allowed
    for refused in (
        "torch.ops.aten.as_strided.default",
        "torch.ops.aten.add_.Tensor",
        "torch.save",
        "torch.ops.aten._reshape_alias.default",
        "torch.ops.aten.set_.source_Tensor",
    ):
        assert refused not in allowed, refused
    assert unsafe_reason(torch.ops.aten.as_strided.default) and unsafe_reason(torch.ops.aten.relu_.default)
    assert unsafe_reason(torch.ops.aten.relu.default) is None
