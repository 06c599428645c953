"""Sizes as graph values: where a symbol can be read from a tensor's shape, and fx nodes computing a size
expression from such reads.

A dynamic program names each size by a sympy expression over its symbols (``s0``, ``16*s1``,
``(s1 - 1)//4 + 1``). Any graph that holds a tensor whose dim is ``a*s + b`` can compute ``s`` itself
(``(sym_size(t, d) - b) // a``), and from such symbols any size expression. Two users:

- the partitioner's pre-decomposition transform reads every size from the program's *inputs*, never
  from an intermediate tensor, so a size on the host does not make an engine return that tensor;
- preprocess replaces a size an engine receives as a scalar argument by the same computation from
  the engine's own tensor inputs (an ONNX ``Shape`` + arithmetic inside the engine).
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from dataclasses import dataclass

import sympy
import torch
from torch.fx import Graph, Node

from et_tensorrt.partition.supported_ops import op_name


@dataclass(frozen=True)
class SizeSource:
    """``symbol == (node.shape[dim] - offset) // scale``."""

    node: Node
    dim: int
    scale: int
    offset: int


def is_size(node: Node) -> bool:
    """A node whose value is an integer size (a ``SymInt`` from ``sym_size`` or size arithmetic, or an int)."""
    val = node.meta.get("val")
    return isinstance(val, (torch.SymInt, int)) and not isinstance(val, bool)


def size_expr(value) -> sympy.Expr:
    """The sympy expression of a size value (a SymInt or an int)."""
    return value.node.expr if isinstance(value, torch.SymInt) else sympy.Integer(int(value))


def linear_form(expr) -> tuple | None:
    """``(symbol, a, b)`` when ``expr`` is ``a*symbol + b`` with integers a > 0, b (``16*s`` from a derived
    ``Dim("h") * 16``), else None."""
    free = list(expr.free_symbols)
    if len(free) != 1:
        return None
    symbol = free[0]
    poly = expr.as_poly(symbol) if hasattr(expr, "as_poly") else None
    if poly is None or poly.degree() != 1:
        return None
    a, b = (int(c) if c.is_Integer else None for c in poly.all_coeffs())
    if a is None or b is None or a <= 0:
        return None
    return symbol, a, b


def size_sources(nodes: Iterable[Node]) -> dict:
    """symbol -> the simplest ``SizeSource`` among the tensor dims of ``nodes`` (a plain ``s`` before ``16*s``;
    among equals, the first node given)."""
    found: dict = {}
    for node in nodes:
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            continue
        for dim, size in enumerate(val.shape):
            if not isinstance(size, torch.SymInt):
                continue
            form = linear_form(size.node.expr)
            if form is None:
                continue
            symbol, a, b = form
            best = found.get(symbol)
            if best is None or (best.scale, best.offset) != (1, 0) and (a, b) == (1, 0):
                found[symbol] = SizeSource(node, dim, a, b)
    return found


class SizeEmitter:
    """Emits fx nodes computing size expressions from ``sources``, before ``anchor``; one node per distinct
    (sub)expression. ``emit`` returns an int, a node, or None when the expression uses a symbol without a
    source or an operation sizes never need here (float sizes, bit operations)."""

    def __init__(self, graph: Graph, sources: dict, anchor: Node):
        self.graph = graph
        self.sources = sources
        self.anchor = anchor
        self._done: dict = {}

    def emit(self, expr) -> Node | int | None:
        expr = sympy.sympify(expr)
        if expr.is_Integer:
            return int(expr)
        if expr in self._done:
            return self._done[expr]
        try:
            value = self._emit(expr)
        except _Unsupported:
            return None
        self._done[expr] = value
        return value

    # -- one sympy node at a time ---------------------------------------------------------------------

    def _emit(self, expr):
        from torch.utils._sympy import functions as F

        if expr.is_Integer:
            return int(expr)
        if expr.is_Symbol:
            return self._symbol(expr)
        if isinstance(expr, sympy.Add):
            return self._sum(expr)
        if isinstance(expr, sympy.Mul):
            coeff, rest = expr.as_coeff_Mul()
            if not coeff.is_Integer:
                raise _Unsupported(expr)
            value = self._product(rest.args if isinstance(rest, sympy.Mul) else (rest,))
            return value if coeff == 1 else self._call(operator.mul, value, int(coeff))
        if isinstance(expr, (sympy.Pow, F.PowByNatural)):
            base, exponent = expr.args
            if not (exponent.is_Integer and int(exponent) >= 1):
                raise _Unsupported(expr)
            return self._product((base,) * int(exponent))
        binary = {
            F.FloorDiv: operator.floordiv,
            F.CleanDiv: operator.floordiv,
            F.Mod: operator.mod,
            F.PythonMod: operator.mod,
        }
        for kind, op in binary.items():
            if isinstance(expr, kind):
                return self._call(op, self._sub_emit(expr.args[0]), self._sub_emit(expr.args[1]))
        if isinstance(expr, F.CeilDiv):  # ceil(a / b) == -((-a) // b)
            a, b = self._sub_emit(expr.args[0]), self._sub_emit(expr.args[1])
            return self._call(operator.neg, self._call(operator.floordiv, self._call(operator.neg, a), b))
        for kind, op in ((F.Max, torch.sym_max), (F.Min, torch.sym_min)):
            if isinstance(expr, kind):
                values = [self._sub_emit(a) for a in expr.args]
                result = values[0]
                for v in values[1:]:
                    result = self._call(op, result, v)
                return result
        raise _Unsupported(expr)

    def _sub_emit(self, expr):
        expr = sympy.sympify(expr)
        if expr in self._done:
            return self._done[expr]
        value = self._emit(expr)
        self._done[expr] = value
        return value

    def _symbol(self, symbol):
        source = self.sources.get(symbol)
        if source is None:
            raise _Unsupported(symbol)
        size = source.node.meta["val"].shape[source.dim]
        value = self._done.get(size.node.expr)  # an existing read of that dim
        if value is None:
            value = self._call(torch.ops.aten.sym_size.int, source.node, source.dim)
            self._done[size.node.expr] = value
        if source.offset:
            value = self._call(operator.sub, value, source.offset)
        if source.scale != 1:
            value = self._call(operator.floordiv, value, source.scale)
        return value

    def _sum(self, expr):
        positive, negative = [], []
        for term in expr.args:
            coeff, _ = term.as_coeff_Mul()
            (negative if coeff < 0 else positive).append(-term if coeff < 0 else term)
        total = self._sub_emit(positive[0]) if positive else 0
        for term in positive[1:]:
            total = self._call(operator.add, total, self._sub_emit(term))
        for term in negative:
            total = self._call(operator.sub, total, self._sub_emit(term))
        return total

    def _product(self, factors):
        value = self._sub_emit(factors[0])
        for factor in factors[1:]:
            value = self._call(operator.mul, value, self._sub_emit(factor))
        return value

    def _call(self, target, *args):
        """One node; its meta value is the same operation on the arguments' SymInts (so the result is the
        program's own size expression, with the program's shape environment)."""
        if all(isinstance(a, int) for a in args):
            return target(*args)
        vals = []
        for a in args:
            if isinstance(a, Node):
                vals.append(a.meta["val"])
            else:
                vals.append(a)
        if target is torch.ops.aten.sym_size.int:
            val = vals[0].shape[vals[1]]
        else:
            val = target(*vals)
        with self.graph.inserting_before(self.anchor):
            node = self.graph.call_function(target, tuple(args))
        node.meta["val"] = val
        return node


class _Unsupported(Exception):
    pass


def replace_uses(node: Node, value: Node | int) -> None:
    """Every use of ``node`` reads ``value`` instead (an int too, which ``replace_all_uses_with`` refuses)."""
    for user in list(node.users):
        user.args = torch.fx.node.map_arg(user.args, lambda a: value if a is node else a)
        user.kwargs = torch.fx.node.map_arg(user.kwargs, lambda a: value if a is node else a)


def same_size(a, b) -> bool:
    """Whether two size values (ints or SymInts) are the same expression."""
    ea = a.node.expr if isinstance(a, torch.SymInt) else sympy.Integer(a)
    eb = b.node.expr if isinstance(b, torch.SymInt) else sympy.Integer(b)
    return ea == eb or sympy.simplify(ea - eb) == 0


_SIZE_QUERIES = ("aten.sym_size.int", "aten.sym_numel.default")


def read_sizes_from(graph: Graph, inputs: list[Node]) -> int:
    """Recompute every size that reads the shape of a tensor outside ``inputs`` (an intermediate) from the
    shapes of ``inputs``, where its expression allows; returns how many size reads were replaced.

    Every size computed from ``inputs`` alone, old or new, ends up right after the inputs: a later re-trace
    (``to_edge``'s decompositions) binds an expression to the first value that has it, and that must be one of
    these, not an intermediate tensor's dim. Existing size nodes are reused, so each size is computed once."""
    sources = size_sources(inputs)
    if not sources:
        return 0
    allowed = set(inputs)
    based: set = set()  # size nodes computed from `inputs` alone, all before `anchor`
    anchor = next(n for n in graph.nodes if n.op != "placeholder")
    emitter = SizeEmitter(graph, sources, anchor)
    replaced = 0
    for node in list(graph.nodes):
        if node.op != "call_function" or not isinstance(node.meta.get("val"), torch.SymInt):
            continue
        if all(a in allowed or a in based for a in node.all_input_nodes):
            if node is anchor:
                anchor = node.next
            else:
                anchor.prepend(node)
            based.add(node)
            emitter._done.setdefault(node.meta["val"].node.expr, node)
            continue
        if op_name(node.target) not in _SIZE_QUERIES:
            continue  # arithmetic on a replaced read becomes input-based once its operands are (next nodes)
        emitter.anchor = anchor
        value = emitter.emit(node.meta["val"].node.expr)
        if value is None:
            continue
        replace_uses(node, value)
        graph.erase_node(node)
        replaced += 1
        if isinstance(value, Node):
            based.add(value)
    graph.lint()
    return replaced
