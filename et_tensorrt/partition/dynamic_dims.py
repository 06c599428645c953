"""The dynamic dims a user declared at export, read from the program before ExecuTorch's ``to_edge``.

``to_edge`` rebuilds range constraints from its shape environment, where torch's 0/1 specialization has
narrowed ``Dim("batch", min=1, max=8)`` to ``[2, 8]``; the ``torch.export`` program still records
``[1, 8]``. The partitioner reads the declared ranges here (``TensorRTPartitioner.transform_for_pre_decomposition``)
and hands them to preprocess, which builds engine profiles from them. The same program names each symbol
the way the user does (the ``Dim`` name, or ``"input:dim"``), which resolves ``opt_sizes``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch
from torch.export import ExportedProgram

from ..sizes import linear_form


def _bound(value) -> int | None:
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isinf(f) or f > 2**62 else int(value)


def _input_symbols(ep: ExportedProgram) -> set:
    """The symbols of the program's user inputs' shapes (not data-dependent ones such as nonzero's)."""
    from torch.export.graph_signature import InputKind

    user = {s.arg.name for s in ep.graph_signature.input_specs if s.kind == InputKind.USER_INPUT}
    found = set()
    for node in ep.graph.nodes:
        val = node.meta.get("val") if node.op == "placeholder" and node.name in user else None
        sizes = list(val.shape) if isinstance(val, torch.Tensor) else [val]
        for size in sizes:
            if isinstance(size, torch.SymInt):
                found |= size.node.expr.free_symbols
    return found


def declared_ranges(ep: ExportedProgram) -> dict[str, tuple[int, int]]:
    """symbol name -> (min, max or -1) as the program declares it, for the symbols of its inputs' shapes. A
    derived dim's range (``16*s0`` in [16, 256], from ``Dim("h", min=1) * 16``) also bounds its symbol."""
    symbols = _input_symbols(ep)
    out: dict[str, list] = {}
    for expr, rng in ep.range_constraints.items():
        lo, hi = _bound(rng.lower), _bound(rng.upper)
        if getattr(expr, "is_Symbol", False):
            symbol, low, high = expr, lo, hi
        else:
            form = linear_form(expr)
            if form is None:
                continue
            symbol, a, b = form
            low = None if lo is None else -((b - lo) // a)  # ceil((lo - b) / a)
            high = None if hi is None else (hi - b) // a
        if symbol not in symbols:
            continue
        name = str(symbol)
        if name not in out:
            out[name] = [low, high]
        else:  # the widest lower bound any declaration implies, the tightest upper one
            cur = out[name]
            cur[0] = low if cur[0] is None else cur[0] if low is None else min(cur[0], low)
            cur[1] = high if cur[1] is None else cur[1] if high is None else min(cur[1], high)
    return {name: (max(0, lo or 0), -1 if hi is None else hi) for name, (lo, hi) in out.items()}


def dim_names(ep: ExportedProgram) -> dict[str, tuple[str, int, int]]:
    """User-facing name -> (symbol name, a, b) with size = a * symbol + b: every ``"input:dim"`` of a dynamic
    user input dim, and the ``Dim`` names torch.export recorded for them (``"batch"``)."""
    from torch.export.graph_signature import InputKind

    user = [s.arg.name for s in ep.graph_signature.input_specs if s.kind == InputKind.USER_INPUT]
    nodes = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
    names: dict[str, tuple[str, int, int]] = {}
    for position, name in enumerate(user):
        val = nodes[name].meta.get("val")
        if not isinstance(val, torch.Tensor):
            continue
        for dim, size in enumerate(val.shape):
            form = linear_form(size.node.expr) if isinstance(size, torch.SymInt) else None
            if form is None:
                continue
            symbol, a, b = form
            names[f"{name}:{dim}"] = (str(symbol), a, b)
            debug = _debug_name(size, position, dim)
            if debug and (a, b) == (1, 0):
                names.setdefault(debug, (str(symbol), 1, 0))
    return names


def input_dim_ranges(ep: ExportedProgram) -> dict[tuple[str, int], tuple[int, int]]:
    """(user input, dim) -> its declared (min, max or -1), for every dynamic user input dim. Read before ``to_edge``:
    a size its shape environment later fixes reads as that number in this program too."""
    ranges = declared_ranges(ep)
    out = {}
    for name, (symbol, a, b) in dim_names(ep).items():
        placeholder, _, dim = name.rpartition(":")
        if placeholder and dim.isdigit() and symbol in ranges:
            low, high = ranges[symbol]
            out[(placeholder, int(dim))] = (a * low + b, high if high == -1 else a * high + b)
    return out


def pinned_dims(declared: dict[tuple[str, int], tuple[int, int]], edge: ExportedProgram) -> list[str]:
    """The dims of ``declared`` (``input_dim_ranges`` of the program before ``to_edge``) that ``edge`` holds at one
    size the declared range does not confine them to (``to_edge``'s narrowing of a ``min=1`` aside), as
    ``"input_ids dim 1 (declared 1..23) is 2"``."""
    nodes = {n.name: n for n in edge.graph.nodes if n.op == "placeholder"}
    pinned = []
    for (name, dim), (low, high) in declared.items():
        val = nodes[name].meta.get("val") if name in nodes else None
        if not isinstance(val, torch.Tensor) or dim >= val.dim():
            continue
        size = val.shape[dim]  # a SymInt the shape environment fixed is a number too
        size = size.node.expr if isinstance(size, torch.SymInt) else size
        if not getattr(size, "is_Integer", isinstance(size, int)):
            continue
        if high == -1 or high > int(size):  # sizes above the pinned one were declared: lost
            pinned.append(f"{name} dim {dim} (declared {low}..{'unbounded' if high == -1 else high}) is {int(size)}")
    return pinned


def _debug_name(size: torch.SymInt, position: int, dim: int) -> str | None:
    """The ``Dim`` name torch.export recorded for a symbol (shape environment bookkeeping; None if absent)."""
    try:
        env = size.node.shape_env
        for source in env.var_to_sources.get(size.node.expr, []):
            name = env.source_name_to_debug_name.get(source.name)
            if name:
                return name
    except AttributeError:
        pass
    return None


def resolve_opt_sizes(opt_sizes: Mapping[str, int | Sequence[int]], ep: ExportedProgram) -> dict[str, tuple[int, ...]]:
    """``{"batch": [1, 64]}`` / ``{"x:0": 8}`` -> symbol name -> opt values of the symbol. Raises ValueError
    naming the dims the program has when a key is unknown or a size does not fit a derived dim."""
    names = dim_names(ep)
    out: dict[str, tuple[int, ...]] = {}
    for key, value in opt_sizes.items():
        if key not in names:
            known = ", ".join(sorted(names)) or "none (the program has no dynamic input dims)"
            raise ValueError(f"opt_sizes names {key!r}, which is not a dynamic dim of the program; known: {known}")
        symbol, a, b = names[key]
        sizes = [value] if isinstance(value, int) else list(value)
        if not sizes or not all(isinstance(v, int) and v >= 1 for v in sizes):
            raise ValueError(f"opt_sizes[{key!r}] must be a positive int or a list of them, got {value!r}")
        values = []
        for v in sizes:
            if (v - b) % a:
                raise ValueError(f"opt_sizes[{key!r}]: {v} is not a size that dim can take ({a}*{symbol} + {b})")
            values.append((v - b) // a)
        if symbol in out and out[symbol] != tuple(values):
            raise ValueError(f"opt_sizes gives the same dim ({symbol}) two different opt lists")
        out[symbol] = tuple(values)
    return out
