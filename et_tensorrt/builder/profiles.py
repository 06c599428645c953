"""Optimization profiles: the (min, opt, max) of every dynamic dim an engine is built for.

Ranges are per symbol of the program (``s0``); each dim's range follows from its size expression
(``16*s0``, ``(s0 - 1)//4 + 1``). Where they come from:

- the partition program's range constraints;
- the ranges the user declared at export (``DynamicDim.declared``, recorded by the partitioner from the
  program before ExecuTorch's ``to_edge``, which narrows ``Dim(min=1)`` to ``[2, max]``): a lower bound the
  edge program narrowed from 0/1 to 2 is taken back to 1;
- opt: the example size the program was traced with, or the user's ``opt_sizes``. Several opt sizes for
  one symbol build several profiles, splitting its range between them (``split_range``); the I/O table
  records their union, TensorRT picks the profile per call.

Unbounded maxima are chosen as ``max_factor`` x opt and reported (``picked``).
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import sympy
import torch
from torch.export import ExportedProgram

from et_tensorrt.builder.edge_to_aten import user_input_nodes
from et_tensorrt.errors import EngineBuildError
from et_tensorrt.format.blob import DimRange
from et_tensorrt.sizes import is_size, linear_form


@dataclass(frozen=True)
class DynamicDim:
    """What the partitioner passes to preprocess about one symbol (compile spec ``DYNAMIC_DIMS``)."""

    declared: tuple[int, int] | None = None  # (min, max or -1) as declared at export
    opts: tuple[int, ...] = ()  # the user's opt sizes (several: one profile each)


def encode_dynamic_dims(dims: Mapping[str, DynamicDim]) -> str:
    return json.dumps(
        {
            name: {"declared": list(d.declared) if d.declared else None, "opts": list(d.opts)}
            for name, d in dims.items()
        },
        sort_keys=True,
    )


def decode_dynamic_dims(text: str) -> dict[str, DynamicDim]:
    try:
        raw = json.loads(text) if text else {}
        return {
            name: DynamicDim(
                tuple(int(v) for v in d["declared"]) if d.get("declared") else None,
                tuple(int(v) for v in d.get("opts", ())),
            )
            for name, d in raw.items()
        }
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise EngineBuildError(f"compile spec dynamic_dims is not valid: {exc}") from exc


@dataclass
class SymbolRanges:
    profile: dict  # symbol -> (min, opt, max): the union of all profiles (what the I/O table records)
    declared: dict  # symbol -> (min, max or -1)
    picked: dict = field(default_factory=dict)  # "input:dim" -> max chosen for an unbounded dim
    profiles: list = field(default_factory=list)  # one dict symbol -> (min, opt, max) per TensorRT profile


def _bound(value) -> int | None:
    """sympy bound -> int, None when infinite."""
    try:
        import torch.utils._sympy.numbers as snum

        if value in (snum.int_oo, -snum.int_oo):
            return None
    except ImportError:
        pass
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    if f in (float("inf"), float("-inf")) or f > 2**62:
        return None
    return int(value)


def _hint(d) -> int | None:
    try:
        hint = d.node.hint
        if hint is not None:
            return int(hint)
    except Exception:  # noqa: BLE001, S110 - no hint: ask the shape environment
        pass
    try:
        return int(d.node.shape_env.size_hint(d.node.expr))
    except Exception:  # noqa: BLE001
        return None


def _symbol_hint(d, symbol) -> int | None:
    """The example value ``symbol`` had when the program was traced (``d`` is a SymInt using it)."""
    try:
        env = d.node.shape_env
        # torch 2.13 renamed var_to_val (now deprecated, with a warning per call) to backed_var_to_val.
        values = env.backed_var_to_val if hasattr(env, "backed_var_to_val") else env.var_to_val
        value = values.get(symbol)
        return int(value) if value is not None else None
    except Exception:  # noqa: BLE001
        return None


def recovered_lower(edge_lower: int, edge_upper: int | None, declared: tuple[int, int] | None) -> int:
    """The lower bound to build for: the declared one where ExecuTorch narrowed a declared 0/1 to 2 (its
    0/1 specialization), with the same upper bound; else the program's own. Never below 1."""
    if declared is not None:
        lo, hi = declared
        same_upper = (hi == -1 and edge_upper is None) or hi == edge_upper
        if lo in (0, 1) and edge_lower == 2 and same_upper:
            return 1
    return max(1, edge_lower)


def split_range(lo: int, hi: int, opts: tuple[int, ...]) -> list[tuple[int, int, int]]:
    """``[lo, hi]`` cut into one sub-range per opt size, each containing its opt, cut at the geometric mean
    of neighbouring opts (batch 1..64 with opts 1 and 64: [1, 8] and [9, 64])."""
    ordered = sorted(set(opts))
    if len(ordered) != len(opts):
        raise EngineBuildError(f"opt sizes {list(opts)} repeat a value")
    for o in ordered:
        if not lo <= o <= hi:
            raise EngineBuildError(f"opt size {o} lies outside the range [{lo}, {hi}]")
    ranges, start = [], lo
    for a, b in itertools.pairwise(ordered):
        cut = math.isqrt(a * b)
        ranges.append((start, a, cut))
        start = cut + 1
    ranges.append((start, ordered[-1], hi))
    return ranges


def _symbol_hints(ep: ExportedProgram) -> dict:
    """symbol -> (a SymInt using it, its linear form or None, "input:dim" where it was found), over the user
    inputs (a size input's "dim" is "value"); a linear use is preferred (its example value tells the hint)."""
    found: dict = {}
    for node in user_input_nodes(ep):
        val = node.meta.get("val")
        sizes = [("value", val)] if is_size(node) else enumerate(val.shape) if isinstance(val, torch.Tensor) else []
        for where, size in sizes:
            if not isinstance(size, torch.SymInt):
                continue
            form = linear_form(size.node.expr)
            for symbol in size.node.expr.free_symbols:
                if symbol not in found or (found[symbol][1] is None and form is not None):
                    found[symbol] = (size, form, f"{node.name}:{where}")
    return found


def symbol_ranges(
    ep: ExportedProgram, max_factor: int = 2, dynamic_dims: Mapping[str, DynamicDim] | None = None
) -> SymbolRanges:
    """Ranges of every symbol the engine's inputs use (tensor dims and size inputs)."""
    dynamic_dims = dynamic_dims or {}
    profile, declared, picked, split = {}, {}, {}, {}
    for symbol, (size, form, where) in sorted(_symbol_hints(ep).items(), key=lambda kv: str(kv[0])):
        rng = ep.range_constraints.get(symbol)
        if rng is None:
            raise EngineBuildError(
                f"an engine input has the symbolic size {size.node.expr}, and the program records no range for {symbol}"
            )
        spec = dynamic_dims.get(str(symbol), DynamicDim())
        hi = _bound(rng.upper)
        lo = recovered_lower(_bound(rng.lower) or 0, hi, spec.declared)
        hint = _symbol_hint(size, symbol)
        if hint is None and form is not None:
            value = _hint(size)
            hint = (value - form[2]) // form[1] if value is not None else None
        opt = max(hint or lo, lo)
        if hi is not None:
            opt = min(opt, hi)
        if spec.opts:
            opt = spec.opts[0]
        declared[symbol] = (lo, -1 if hi is None else hi)
        if hi is None:
            hi = max(lo, max_factor * max([opt, *spec.opts]))
            picked[where] = hi if form is None else form[1] * hi + form[2]
        profile[symbol] = (lo, opt, hi)
        if len(spec.opts) > 1:
            split[symbol] = split_range(lo, hi, spec.opts)
        elif spec.opts and not lo <= opt <= hi:
            raise EngineBuildError(f"opt size {opt} for {symbol} lies outside its range [{lo}, {hi}]")
    counts = {len(r) for r in split.values()}
    if len(counts) > 1:
        raise EngineBuildError(
            "symbols with several opt sizes must list the same number of them (one per profile): "
            + ", ".join(f"{s}: {len(r)}" for s, r in split.items())
        )
    n_profiles = counts.pop() if counts else 1
    profiles = [{s: split[s][i] if s in split else r for s, r in profile.items()} for i in range(n_profiles)]
    return SymbolRanges(profile, declared, picked, profiles)


# A one-symbol size expression is evaluated at every value of its symbol up to this many values (exact
# range even for floor divisions and modulos); beyond it, and with several symbols, at the range corners.
_EXACT_RANGE_VALUES = 4096


def expr_range(expr, profile: dict) -> tuple[int, int, int]:
    """(min, opt, max) of a size expression over the profile ranges of its symbols."""
    free = sorted(expr.free_symbols, key=str)
    opt = int(expr.xreplace({s: sympy.Integer(profile[s][1]) for s in free}))
    if len(free) == 1 and linear_form(expr) is None:
        (symbol,) = free
        lo, _, hi = profile[symbol]
        if hi - lo < _EXACT_RANGE_VALUES:
            values = [int(expr.xreplace({symbol: sympy.Integer(v)})) for v in range(lo, hi + 1)]
            return min(values), opt, max(values)
    corners = [
        int(expr.xreplace({s: sympy.Integer(v) for s, v in zip(free, point)}))
        for point in itertools.product(*[(profile[s][0], profile[s][2]) for s in free])
    ]
    return min(corners), opt, max(corners)


def size_range(expr, ranges: SymbolRanges) -> tuple[DimRange, DimRange, tuple[DimRange, ...]]:
    """(engine range, declared range, range per profile) of one size: a dim or a size input's value."""
    if isinstance(expr, int) or not expr.free_symbols:  # a static size
        r = DimRange.static(int(expr))
        return r, r, tuple(r for _ in ranges.profiles)
    free = expr.free_symbols
    if free.issubset(ranges.profile.keys()):
        union = DimRange(*expr_range(expr, ranges.profile))
        per_profile = tuple(DimRange(*expr_range(expr, p)) for p in ranges.profiles)
        bounded = all(ranges.declared[s][1] != -1 for s in free)
        return union, union if bounded else DimRange(union.min, union.opt, -1), per_profile
    return None, None, ()


def dims_of(val: torch.Tensor, ranges: SymbolRanges, ep: ExportedProgram):
    """(engine dims, declared dims, dims per profile) of a tensor."""
    dims, decl, per_profile = [], [], []
    for d in val.shape:
        expr = d.node.expr if isinstance(d, torch.SymInt) else int(d)
        union, declared, profiles = size_range(expr, ranges)
        if union is None:
            # Data-dependent (unbacked) size: use its declared range, unbounded when unknown.
            rng = ep.range_constraints.get(expr) if getattr(expr, "is_Symbol", False) else None
            lo = max(0, _bound(rng.lower) or 0) if rng is not None else 0
            hi = _bound(rng.upper) if rng is not None else None
            union = declared = DimRange(lo, lo, -1 if hi is None else hi)
            profiles = tuple(union for _ in ranges.profiles)
        dims.append(union)
        decl.append(declared)
        per_profile.append(profiles)
    return tuple(dims), tuple(decl), tuple(tuple(p[i] for p in per_profile) for i in range(len(ranges.profiles)))
