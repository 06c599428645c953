"""The INPUT_GUARDS of a partition (format/input_guards.py), read off its aten program: which of its arguments'
dims torch.export recorded as one symbol (or an affine function of one: ``2*s0``, ``s0 + 1``), and which integer
arguments index a table directly (``aten.embedding`` of a token id), with that table's rows as their bound."""

from __future__ import annotations

from collections import defaultdict

import torch
from torch.export import ExportedProgram

from et_tensorrt.builder.edge_to_aten import user_input_nodes
from et_tensorrt.format.input_guards import VALUE, DimGuard, IndexGuard, InputGuards

_LOOKUPS = {torch.ops.aten.embedding.default: (0, 1)}  # op -> (table argument, indices argument)


def _affine(size) -> tuple[str, int, int] | None:
    """(symbol, scale, offset) when ``size`` (a SymInt) is ``scale * symbol + offset`` with integers, else None."""
    import sympy

    expr = size.node.expr
    if len(expr.free_symbols) != 1:
        return None
    (symbol,) = expr.free_symbols
    try:
        poly = sympy.Poly(expr, symbol)
    except sympy.PolynomialError:
        return None
    coeffs = poly.all_coeffs()
    if poly.degree() != 1 or not all(c.is_Integer for c in coeffs) or coeffs[0] < 1:
        return None
    return str(symbol), int(coeffs[0]), int(coeffs[1])


def input_guards(program: ExportedProgram) -> InputGuards:
    arguments = user_input_nodes(program)  # the delegate's arguments, in order
    terms = defaultdict(list)
    for argument, node in enumerate(arguments):
        val = node.meta.get("val")
        sizes = [(VALUE, val)] if isinstance(val, torch.SymInt) else list(enumerate(getattr(val, "shape", ())))
        for dim, size in sizes:
            affine = _affine(size) if isinstance(size, torch.SymInt) else None
            if affine is not None:
                name, scale, offset = affine
                terms[name].append((argument, dim, scale, offset))
    dims = []
    # a symbol seen once, plainly, is bounded by its argument's own range: nothing relates it to anything
    related = [name for name in sorted(terms) if len(terms[name]) > 1 or terms[name][0][2] != 1]
    for symbol, name in enumerate(related):
        dims += [DimGuard(a, d, symbol, scale, offset, name) for a, d, scale, offset in terms[name]]
    index = {node: i for i, node in enumerate(arguments)}
    indices = {}
    for node in program.graph.nodes:
        if node.op != "call_function" or node.target not in _LOOKUPS:
            continue
        table, looked_up = (node.args[i] for i in _LOOKUPS[node.target])
        rows = getattr(table.meta.get("val"), "shape", (None,))[0] if isinstance(table, torch.fx.Node) else None
        if looked_up in index and isinstance(rows, int) and rows > 0:
            argument = index[looked_up]
            indices[argument] = min(rows, indices.get(argument, rows))
    return InputGuards(tuple(dims), tuple(IndexGuard(a, b) for a, b in sorted(indices.items())))
