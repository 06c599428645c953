"""Validate a serialized ``torch.export`` program (torch's schema dataclasses) before torch deserializes it.

torch's deserializer is written for trusted files. What it does with a field that could run code:
``expr_str`` -> ``sympy.sympify`` (``eval``); a treespec's enum context -> ``importlib.import_module``;
a node target -> ``getattr`` down ``torch`` / ``math`` / ``operator`` (any callable, then called when the
graph runs); ``as_operator`` arguments and node metadata (``source_fn_stack``) -> the same resolution;
``guards_code`` -> Python source for the guard function; names and attribute paths -> Python source that
``GraphModule.recompile`` generates and ``exec``s; custom objects, sub-graphs (higher-order ops) and
tokens -> torchbind / arbitrary callables. This module accepts exactly what a partition lowered by
et_tensorrt contains: allowlisted aten ops over tensors, identifier names, dotted weight paths, shape
expressions of :mod:`.expressions`, plain treespecs; it drops every node's metadata and everything else is
refused with a message naming the entry. Sizes are bounded (int64, rank, lengths).
"""

from __future__ import annotations

import builtins
import json
import keyword
import re

from torch._export.serde import schema as S

from et_tensorrt.errors import ProgramRefusedError

from .allowed_ops import allowed_targets
from .expressions import SYMBOL, ExpressionError, check_expression

INT64 = (-(2**63), 2**63 - 1)
MAX_RANK = 64
MAX_NAME = 255
MAX_STRING = 4096
MAX_TREESPEC = 1 << 16

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# A module name may hold "-" (torchvision's regnet: ``block1-0``); torch.fx writes such a part as
# ``getattr(m, "block1-0")`` without escaping, so quotes and backslashes must never pass.
_PATH_PART = re.compile(r"[A-Za-z0-9_-]+\Z")
# Names the generated forward() relies on: a value named like one would shadow it.
_RESERVED = frozenset(dir(builtins)) | {
    "torch",
    "self",
    "fx_pytree",
    "pytree",
    "inf",
    "nan",
    "device",
    "math",
    "operator",
    "_operator",
    "forward",
}
_DTYPES = frozenset(int(v) for v in S.ScalarType if v != S.ScalarType.UNKNOWN)
_MEMORY_FORMATS = frozenset(int(v) for v in S.MemoryFormat if v != S.MemoryFormat.Unknown)
_DEVICE_TYPES = ("cpu", "cuda")


def refuse(where: str, what: str) -> None:
    raise ProgramRefusedError(f"embedded program: {where}: {what}")


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def check_int(v, where: str, lo: int = INT64[0]) -> None:
    if not _is_int(v) or not lo <= v <= INT64[1]:
        refuse(where, f"{v!r} is not an integer in [{lo}, 2^63)")


def check_name(v, where: str) -> None:
    """A value name: an identifier that is no keyword, builtin or name the generated code uses."""
    if not isinstance(v, str) or len(v) > MAX_NAME or not _IDENT.match(v):
        refuse(where, f"name {v!r} is not an identifier")
    if keyword.iskeyword(v) or v in _RESERVED or v.startswith("__"):
        refuse(where, f"name {v!r} is reserved")


def check_path(v, where: str) -> None:
    """A weight's target: a dotted module path (``layers.0.weight``, ``block1-0.proj``), no dunder parts."""
    if not isinstance(v, str) or not 0 < len(v) <= 4 * MAX_NAME:
        refuse(where, f"target {v!r} is not a dotted module path")
    for part in v.split("."):
        if not _PATH_PART.match(part) or part.startswith("__"):
            refuse(where, f"target {v!r} is not a dotted module path")


def _list(v, where: str, limit: int = 1 << 20) -> list:
    if not isinstance(v, list) or len(v) > limit:
        refuse(where, "is not a list" if not isinstance(v, list) else f"has more than {limit} items")
    return v


def _dict(v, where: str) -> dict:
    if not isinstance(v, dict):
        refuse(where, "is not a mapping")
    return v


def _union(v, cls, where: str):
    if not isinstance(v, cls):
        refuse(where, f"is not a {cls.__name__}")
    return v.type, v.value


# ------------------------------------------------------------------------------------ symbolic values


def check_expr(expr: S.SymExpr, where: str) -> None:
    if not isinstance(expr, S.SymExpr):
        refuse(where, "is not a symbolic expression")
    try:
        check_expression(expr.expr_str)
    except ExpressionError as e:
        refuse(where, f"expression {str(expr.expr_str)[:80]!r} refused ({e}); torch would eval it")
    if expr.hint is not None:
        kind, value = _union(expr.hint, S.SymExprHint, where + " hint")
        if kind == "as_int":
            check_int(value, where + " hint")
        elif kind == "as_bool" and not isinstance(value, bool):
            refuse(where + " hint", "is not a bool")
        elif kind == "as_float" and not isinstance(value, float):
            refuse(where + " hint", "is not a float")


def check_sym(v, cls, where: str, lo: int = INT64[0]) -> None:
    """A SymInt / SymBool / SymFloat value: a literal or an expression of the grammar."""
    kind, value = _union(v, cls, where)
    if kind == "as_expr":
        check_expr(value, where)
    else:
        _check_literal(kind, value, where, lo)


def _check_literal(kind: str, value, where: str, lo: int = INT64[0]) -> None:
    """The literal kinds a SymInt / SymBool / SymFloat value or argument may hold."""
    if kind == "as_int":
        check_int(value, where, lo)
    elif kind == "as_bool":
        if not isinstance(value, bool):
            refuse(where, "is not a bool")
    elif kind == "as_float":
        if not isinstance(value, float):
            refuse(where, "is not a float")
    else:
        refuse(where, f"unknown kind {kind!r}")


def check_tensor_meta(meta, where: str) -> None:
    if not isinstance(meta, S.TensorMeta):
        refuse(where, "is not tensor metadata")
    if meta.dtype not in _DTYPES:
        refuse(where, f"dtype code {meta.dtype!r} is unknown")
    if meta.layout != S.Layout.Strided:
        refuse(where, f"layout {meta.layout!r} is not strided")
    if not isinstance(meta.requires_grad, bool):
        refuse(where, "requires_grad is not a bool")
    check_device(meta.device, where)
    for field, values in (("sizes", meta.sizes), ("strides", meta.strides)):
        for i, s in enumerate(_list(values, f"{where} {field}", MAX_RANK)):
            check_sym(s, S.SymInt, f"{where} {field}[{i}]", lo=0)
    if len(meta.sizes) != len(meta.strides):
        refuse(where, "has different numbers of sizes and strides")
    check_sym(meta.storage_offset, S.SymInt, f"{where} storage_offset", lo=0)


def check_device(device, where: str) -> None:
    if not isinstance(device, S.Device) or device.type not in _DEVICE_TYPES:
        refuse(where, f"device {getattr(device, 'type', device)!r} is neither cpu nor cuda")
    if device.index is not None and (not _is_int(device.index) or not 0 <= device.index <= 127):
        refuse(where, f"device index {device.index!r} is out of range")


# ------------------------------------------------------------------------------------------ arguments


def _tensor_arg(v, where: str) -> None:
    if not isinstance(v, S.TensorArgument):
        refuse(where, "is not a tensor argument")
    check_name(v.name, where)


def _sym_arg(v, cls, where: str) -> None:
    kind, value = _union(v, cls, where)
    if kind == "as_name":
        check_name(value, where)
    else:
        _check_literal(kind, value, where)


# What each refused Argument kind would bring in.
_REFUSED_ARGUMENTS = {
    "as_graph": "a sub-graph (higher-order op)",
    "as_custom_obj": "a custom (torchbind) object",
    "as_operator": "an operator reference (resolved to any torch callable)",
    "as_optional_tensor": "an optional tensor (unused by delegated ops)",
    "as_complex": "a complex scalar (unused by delegated ops)",
    "as_nested_tensors": "nested tensor lists (unused by delegated ops)",
    "as_int_lists": "int lists (Triton grids)",
    "as_float_lists": "float lists (unused by delegated ops)",
    "as_string_to_argument": "a string-keyed argument map (unused by delegated ops)",
}


def check_argument(arg, where: str) -> None:
    kind, value = _union(arg, S.Argument, where)
    if kind in _REFUSED_ARGUMENTS:
        refuse(where, f"{kind} ({_REFUSED_ARGUMENTS[kind]}) is refused")
    if kind == "as_none":
        return
    if kind == "as_tensor":
        _tensor_arg(value, where)
    elif kind == "as_tensors":
        for i, t in enumerate(_list(value, where)):
            _tensor_arg(t, f"{where}[{i}]")
    elif kind == "as_optional_tensors":
        for i, t in enumerate(_list(value, where)):
            k, v = _union(t, S.OptionalTensorArgument, f"{where}[{i}]")
            if k == "as_tensor":
                _tensor_arg(v, f"{where}[{i}]")
            elif k != "as_none":
                refuse(f"{where}[{i}]", f"unknown kind {k!r}")
    elif kind in ("as_int", "as_ints"):
        for i, v in enumerate(_list(value, where) if kind == "as_ints" else [value]):
            check_int(v, f"{where}[{i}]")
    elif kind in ("as_float", "as_floats"):
        for v in _list(value, where) if kind == "as_floats" else [value]:
            if not isinstance(v, float):
                refuse(where, f"{v!r} is not a float")
    elif kind in ("as_bool", "as_bools"):
        for v in _list(value, where) if kind == "as_bools" else [value]:
            if not isinstance(v, bool):
                refuse(where, f"{v!r} is not a bool")
    elif kind in ("as_string", "as_strings"):
        for v in _list(value, where) if kind == "as_strings" else [value]:
            if not isinstance(v, str) or len(v) > MAX_STRING:
                refuse(where, "is not a (bounded) string")
    elif kind in ("as_sym_int", "as_sym_ints", "as_sym_bool", "as_sym_bools", "as_sym_float", "as_sym_floats"):
        cls = {"int": S.SymIntArgument, "bool": S.SymBoolArgument, "float": S.SymFloatArgument}[
            kind.split("_")[-1].rstrip("s")
        ]
        for i, v in enumerate(_list(value, where) if kind.endswith("s") else [value]):
            _sym_arg(v, cls, f"{where}[{i}]")
    elif kind == "as_scalar_type":
        if value not in _DTYPES:
            refuse(where, f"dtype code {value!r} is unknown")
    elif kind == "as_memory_format":
        if value not in _MEMORY_FORMATS:
            refuse(where, f"memory format code {value!r} is unknown")
    elif kind == "as_layout":
        if value != S.Layout.Strided:
            refuse(where, f"layout {value!r} is not strided")
    elif kind == "as_device":
        check_device(value, where)
    else:
        refuse(where, f"argument kind {kind!r} is refused")


# ------------------------------------------------------------------------------------------ the graph


_NODE_OUTPUTS = (
    "as_tensor",
    "as_tensors",
    "as_sym_int",
    "as_sym_ints",
    "as_sym_bool",
    "as_sym_bools",
    "as_none",
    "as_optional_tensors",
)


def check_node(node, index: int) -> None:
    if not isinstance(node, S.Node):
        refuse(f"node {index}", "is not a node")
    where = f"node {index}" + (f" ({node.name})" if isinstance(node.name, str) else "")
    if node.name is not None:
        check_name(node.name, where)
    if not isinstance(node.target, str) or node.target not in allowed_targets():
        refuse(where, f"target {str(node.target)[:120]!r} is not an op et_tensorrt delegates")
    for i, named in enumerate(_list(node.inputs, f"{where} inputs")):
        if not isinstance(named, S.NamedArgument):
            refuse(f"{where} input {i}", "is not a named argument")
        # The op schema's argument name: a lookup key only (torch builds the call from the op's schema).
        if not isinstance(named.name, str) or len(named.name) > MAX_NAME or not _IDENT.match(named.name):
            refuse(f"{where} input {i}", f"argument name {str(named.name)[:80]!r} is not an identifier")
        if named.kind is not None and named.kind not in (1, 2):
            refuse(f"{where} input {i}", f"argument kind {named.kind!r} is unknown")
        check_argument(named.arg, f"{where} input {named.name!r}")
    for i, out in enumerate(_list(node.outputs, f"{where} outputs")):
        kind, _ = _union(out, S.Argument, f"{where} output {i}")
        if kind not in _NODE_OUTPUTS:
            refuse(f"{where} output {i}", f"output kind {kind!r} is refused")
        check_argument(out, f"{where} output {i}")
    if node.is_hop_single_tensor_return not in (None, True, False):
        refuse(where, "is_hop_single_tensor_return is not a bool")
    # Metadata (stack traces, module stacks, source functions resolved by name, custom JSON) is only ever
    # informational, and torch interprets some of it: dropped.
    node.metadata = {}


def check_graph(graph) -> None:
    if not isinstance(graph, S.Graph):
        refuse("graph", "is not a graph")
    for i, arg in enumerate(_list(graph.inputs, "graph inputs")):
        kind, value = _union(arg, S.Argument, f"graph input {i}")
        if kind == "as_sym_int":  # a size argument (docs/dynamic-shapes.md)
            _sym_arg(value, S.SymIntArgument, f"graph input {i}")
            continue
        if kind != "as_tensor":
            refuse(f"graph input {i}", f"kind {kind!r} is refused (a delegate's inputs are tensors and sizes)")
        _tensor_arg(value, f"graph input {i}")
    for i, arg in enumerate(_list(graph.outputs, "graph outputs")):
        kind, value = _union(arg, S.Argument, f"graph output {i}")
        if kind != "as_tensor":
            refuse(f"graph output {i}", f"kind {kind!r} is refused (a delegate's outputs are tensors)")
        _tensor_arg(value, f"graph output {i}")
    for i, node in enumerate(_list(graph.nodes, "graph nodes")):
        check_node(node, i)
    for name, meta in _dict(graph.tensor_values, "tensor_values").items():
        check_name(name, f"tensor value {name!r}")
        check_tensor_meta(meta, f"tensor value {name!r}")
    for field, cls in (("sym_int_values", S.SymInt), ("sym_bool_values", S.SymBool), ("sym_float_values", S.SymFloat)):
        for name, value in _dict(getattr(graph, field), field).items():
            check_name(name, f"{field} {name!r}")
            check_sym(value, cls, f"{field} {name!r}")
    for name in _dict(graph.custom_obj_values, "custom_obj_values"):
        refuse(f"custom object {str(name)[:80]!r}", "custom (torchbind) objects are refused")
    if not isinstance(graph.is_single_tensor_return, bool):
        refuse("graph", "is_single_tensor_return is not a bool")


# -------------------------------------------------------------------------------- signature and module


_TARGET_FIELD = {"parameter": "parameter_name", "buffer": "buffer_name", "tensor_constant": "tensor_constant_name"}


def check_signature(sig) -> None:
    if not isinstance(sig, S.GraphSignature):
        refuse("signature", "is not a graph signature")
    for i, spec in enumerate(_list(sig.input_specs, "input specs")):
        kind, value = _union(spec, S.InputSpec, f"input spec {i}")
        where = f"input spec {i} ({kind})"
        if kind == "user_input":
            k, v = _union(value.arg, S.Argument, where)
            if k == "as_sym_int":  # a size argument
                _sym_arg(v, S.SymIntArgument, where)
            elif k != "as_tensor":
                refuse(where, f"kind {k!r} is refused (a delegate's inputs are tensors and sizes)")
            else:
                _tensor_arg(v, where)
        elif kind in ("parameter", "buffer", "tensor_constant"):
            _tensor_arg(value.arg, where)
            check_path(getattr(value, _TARGET_FIELD[kind]), where)
            if kind == "buffer" and not isinstance(value.persistent, bool):
                refuse(where, "persistent is not a bool")
        elif kind == "custom_obj":
            refuse(
                f"custom object {getattr(value, 'custom_obj_name', '?')!r}", "custom (torchbind) objects are refused"
            )
        else:
            refuse(where, "is refused (tokens and constant inputs never occur in a delegated partition)")
    for i, spec in enumerate(_list(sig.output_specs, "output specs")):
        kind, value = _union(spec, S.OutputSpec, f"output spec {i}")
        where = f"output spec {i} ({kind})"
        if kind == "user_output":
            k, v = _union(value.arg, S.Argument, where)
            if k != "as_tensor":
                refuse(where, f"kind {k!r} is refused (a delegate's outputs are tensors)")
            _tensor_arg(v, where)
        elif kind == "buffer_mutation":
            _tensor_arg(value.arg, where)
            check_path(value.buffer_name, where)
        else:
            refuse(where, "is refused (only user outputs and buffer mutations occur in a delegated partition)")


def check_treespec(text, where: str) -> None:
    """A pytree spec of tuples, lists, string-keyed dicts and leaves; nothing torch would import."""
    if not isinstance(text, str) or len(text) > MAX_TREESPEC:
        refuse(where, "is not a (bounded) treespec string")
    try:
        protocol, root = json.loads(text)
    except (ValueError, TypeError) as e:
        refuse(where, f"is not a treespec ({e})")
    if protocol != 1:
        refuse(where, f"treespec protocol {protocol!r} is not 1")
    budget = [10000]

    def node(n, depth: int) -> None:
        budget[0] -= 1
        if depth > 16 or budget[0] < 0:
            refuse(where, "treespec is too deep or too large")
        if not isinstance(n, dict) or set(n) != {"type", "context", "children_spec"}:
            refuse(where, "treespec node has unexpected fields")
        children = n["children_spec"]
        if not isinstance(children, list):
            refuse(where, "treespec children are not a list")
        kind, context = n["type"], n["context"]
        if kind is None:
            if context is not None or children:
                refuse(where, "treespec leaf has a context or children")
            return
        if kind in ("builtins.tuple", "builtins.list"):
            if context != "null":
                refuse(where, f"{kind} has a context")
        elif kind == "builtins.dict":
            try:
                keys = json.loads(context) if isinstance(context, str) else None
            except ValueError:
                keys = None
            if (
                not isinstance(keys, list)
                or len(keys) != len(children)
                or not all(isinstance(k, str) and len(k) <= MAX_NAME for k in keys)
            ):
                refuse(where, "dict treespec context is not a list of its string keys")
        else:
            refuse(where, f"treespec type {str(kind)[:80]!r} is refused (torch would import or call it)")
        for child in children:
            node(child, depth + 1)

    node(root, 0)


def check_module_call_graph(entries) -> None:
    for i, entry in enumerate(_list(entries, "module_call_graph", 1024)):
        if not isinstance(entry, S.ModuleCallEntry):
            refuse(f"module_call_graph entry {i}", "is not a module call entry")
        if entry.fqn != "":
            check_path(entry.fqn, f"module_call_graph entry {i}")
        sig = entry.signature
        if sig is None:
            continue
        if not isinstance(sig, S.ModuleCallSignature):
            refuse(f"module_call_graph entry {i}", "signature is not a module call signature")
        for j, arg in enumerate(_list(sig.inputs, "module call inputs") + _list(sig.outputs, "module call outputs")):
            check_argument(arg, f"module_call_graph entry {i} argument {j}")
        check_treespec(sig.in_spec, f"module_call_graph entry {i} in_spec")
        check_treespec(sig.out_spec, f"module_call_graph entry {i} out_spec")
        if sig.forward_arg_names is not None:
            for name in _list(sig.forward_arg_names, "forward_arg_names", 4096):
                check_name(name, f"module_call_graph entry {i} forward_arg_names")


def check_program(ep) -> None:
    """Validate (and strip the metadata of) a deserialized-to-dataclass ``schema.ExportedProgram``."""
    if not isinstance(ep, S.ExportedProgram):
        refuse("program", "is not a torch.export program")
    if not isinstance(ep.schema_version, S.SchemaVersion) or ep.schema_version.major != S.SCHEMA_VERSION[0]:
        refuse("schema_version", f"{ep.schema_version!r} is not this torch's export schema {S.SCHEMA_VERSION}")
    for ns, version in _dict(ep.opset_version, "opset_version").items():
        check_name(ns, "opset_version")
        check_int(version, f"opset_version {ns!r}")
    if not all(v in ("ATEN", "") for v in _list(ep.verifiers, "verifiers", 4)):
        refuse("verifiers", f"{ep.verifiers!r}: only the aten verifier is allowed")
    if _list(ep.guards_code, "guards_code"):
        refuse("guards_code", "is Python source; refused")
    if not isinstance(ep.torch_version, str) or len(ep.torch_version) > 64:
        refuse("torch_version", "is not a short string")
    for name, rc in _dict(ep.range_constraints, "range_constraints").items():
        if not isinstance(name, str) or not SYMBOL.match(name):
            refuse(f"range constraint {str(name)[:40]!r}", "is not a shape symbol name")
        if not isinstance(rc, S.RangeConstraint):
            refuse(f"range constraint {name!r}", "is not a range")
        for bound in (rc.min_val, rc.max_val):
            if bound is not None:
                check_int(bound, f"range constraint {name!r}")
    gm = ep.graph_module
    if not isinstance(gm, S.GraphModule):
        refuse("graph_module", "is not a graph module")
    if _dict(gm.treespec_namedtuple_fields, "treespec_namedtuple_fields"):
        refuse("treespec_namedtuple_fields", "named tuples are refused")
    gm.metadata = {}  # informational ("custom" JSON): dropped
    check_graph(gm.graph)
    check_signature(gm.signature)
    check_module_call_graph(gm.module_call_graph)
