"""Ops ExecuTorch cannot take, rewritten into Core ATen ops before it decomposes the program (the partitioner's
pre-decomposition transform), so its verifier never sees them and every front door gets the same program.

Both come from transformers' default experts code (``grouped_mm_experts_forward``: sort the routed rows by
expert, count the rows per expert with ``histc``, ``cumsum`` the counts into offsets, one grouped matmul):

- ``aten.histc``: not in Core ATen (``to_edge`` refuses it). It becomes the comparisons it is: each element's bin
  by PyTorch's own formula, one-hot against the bins, summed.
- a grouped matmul over row offsets: ``transformers::grouped_mm_fallback`` (a custom op transformers exports for
  non-bf16 weights: ExecuTorch has no kernel for it) and ``aten._grouped_mm`` with ``offs`` (what bf16 weights
  export to; not in Core ATen). Each row's group is the number of offsets at or below it; then either each row
  is multiplied by its own group's weight (gathered), or every row by every group's weight and each row's
  result picked (dense). Gathering reads one weight per row, the dense form every weight once: the rewrite
  gathers when the rows can never outnumber the groups (a decode step), else computes densely (a prefill).
  Rows past the last offset are zero, as transformers' fallback leaves them.

And ``aten.empty_like`` (transformers' inverse permutation, ``inv = empty_like(perm); inv[perm] = arange``):
PyTorch decomposes it into ``aten.empty_permuted``, which is not in Core ATen either, and ExecuTorch turns an
``aten.empty`` into ``dim_order_ops._empty_dim_order``, whose ``int[]`` sizes pin a dynamic size to its example.
It becomes ``aten.full`` of its sizes with zeros (an empty tensor may hold any values).

The rewrites compute what the op computes; the partitioner then delegates what TensorRT takes (the sort over
the routed rows, ``sort``, is in the op table: TensorRT's TopK).
"""

from __future__ import annotations

import torch
from torch.fx import Node

from .supported_ops import op_name

aten = torch.ops.aten

HISTC = "aten.histc.default"
EMPTY_LIKE = "aten.empty_like.default"
GROUPED_MM = ("transformers.grouped_mm_fallback.default", "aten._grouped_mm.default")


def _arg(node: Node, index: int, name: str, default=None):
    return node.args[index] if len(node.args) > index else node.kwargs.get(name, default)


def _val(value):
    return value.meta.get("val") if isinstance(value, Node) else None


def grouped_mm_form(node: Node) -> bool:
    """Whether a grouped matmul node is the MoE form: ``(S, K) x (G, K, N)`` with ``offs`` ``(G,)`` over the rows."""
    a, b, offs = _val(node.args[0]), _val(node.args[1]), _val(_arg(node, 2, "offs"))
    tensors = all(isinstance(t, torch.Tensor) for t in (a, b, offs))
    return tensors and a.dim() == 2 and b.dim() == 3 and offs.dim() == 1 and not offs.dtype.is_floating_point


def rewritable(node: Node) -> bool:
    if node.op != "call_function":
        return False
    name = op_name(node.target)
    return name in (HISTC, EMPTY_LIKE) or (name in GROUPED_MM and grouped_mm_form(node))


def rewrite(node: Node, rw) -> Node:
    """The node computing what ``node`` computes in core ops, emitted before it by ``rw`` (a
    ``builder.op_rewrites.Rewriter``); the caller replaces ``node`` with it."""
    rw.before = node
    name = op_name(node.target)
    return _histc(node, rw) if name == HISTC else _empty(node, rw) if name == EMPTY_LIKE else _grouped_mm(node, rw)


def _size(rw, tensor: Node, dim: int):
    size = _val(tensor).shape[dim]
    return size if isinstance(size, int) else rw.emit(aten.sym_size.int, tensor, dim)


def _empty(node: Node, rw) -> Node:
    x = node.args[0]
    val = _val(x)
    sizes = [_size(rw, x, d) for d in range(val.dim())]
    dtype, device = node.kwargs.get("dtype") or val.dtype, node.kwargs.get("device") or val.device
    return rw.emit(aten.full.default, sizes, 0, dtype=dtype, device=device)


def _histc(node: Node, rw) -> Node:
    """PyTorch's CPU kernel: an element ``x`` in ``[lo, hi]`` counts in bin ``int((x - lo) * bins / (hi - lo))``,
    the last bin holding ``hi`` too; other elements (and NaN) count nowhere. ``min == max``: the data's range
    (widened by 1 each way when it is one value)."""
    x, bins = node.args[0], _arg(node, 1, "bins", 100)
    lo, hi = _arg(node, 2, "min", 0), _arg(node, 3, "max", 0)
    dtype = _val(x).dtype
    flat = rw.emit(aten.reshape.default, x, [-1])
    if lo == hi:
        lo, hi = rw.emit(aten.amin.default, flat, [0]), rw.emit(aten.amax.default, flat, [0])
        same = rw.emit(aten.eq.Tensor, lo, hi)
        lo = rw.emit(aten.where.self, same, rw.emit(aten.sub.Scalar, lo, 1), lo)
        hi = rw.emit(aten.where.self, same, rw.emit(aten.add.Scalar, hi, 1), hi)
        inside = rw.emit(aten.logical_and.default, rw.emit(aten.ge.Tensor, flat, lo), rw.emit(aten.le.Tensor, flat, hi))
        width = rw.emit(aten.sub.Tensor, hi, lo)
        scaled = rw.emit(aten.div.Tensor, rw.emit(aten.mul.Scalar, rw.emit(aten.sub.Tensor, flat, lo), bins), width)
    else:
        inside = rw.emit(aten.logical_and.default, rw.emit(aten.ge.Scalar, flat, lo), rw.emit(aten.le.Scalar, flat, hi))
        width = float(torch.tensor(hi, dtype=dtype) - torch.tensor(lo, dtype=dtype))  # in x's dtype, as PyTorch
        scaled = rw.emit(aten.div.Scalar, rw.emit(aten.mul.Scalar, rw.emit(aten.sub.Scalar, flat, lo), bins), width)
    # outside [lo, hi] the bin is garbage (NaN included); `inside` drops those elements below
    index = rw.emit(aten.clamp.default, rw.emit(aten.floor.default, scaled), 0, bins - 1)
    index = rw.emit(aten._to_copy.default, index, dtype=torch.int64)
    bin_ids = rw.emit(aten.arange.default, bins, dtype=torch.int64, device=_val(x).device)
    hits = rw.emit(aten.eq.Tensor, rw.emit(aten.unsqueeze.default, index, 1), bin_ids)  # (N, bins)
    hits = rw.emit(aten.logical_and.default, hits, rw.emit(aten.unsqueeze.default, inside, 1))
    counts = rw.emit(aten.sum.dim_IntList, rw.emit(aten._to_copy.default, hits, dtype=torch.int64), [0])
    return rw.emit(aten._to_copy.default, counts, dtype=dtype)


def _grouped_mm(node: Node, rw) -> Node:
    a, b, offs = node.args[0], node.args[1], _arg(node, 2, "offs")
    bias, out_dtype = _arg(node, 3, "bias"), _arg(node, 4, "out_dtype")
    if out_dtype is not None and out_dtype != _val(a).dtype:  # computed in the result's dtype
        a, b = (rw.emit(aten._to_copy.default, t, dtype=out_dtype) for t in (a, b))
        bias = None if bias is None else rw.emit(aten._to_copy.default, bias, dtype=out_dtype)
    groups = _val(b).shape[0]
    rows = _size(rw, a, 0)
    # a row's group: how many offsets lie at or below its index (rows past the last offset: `groups`)
    positions = rw.emit(aten.arange.default, rows, dtype=torch.int64, device=_val(a).device)
    ends = rw.emit(aten._to_copy.default, offs, dtype=torch.int64)
    passed = rw.emit(
        aten.le.Tensor, rw.emit(aten.unsqueeze.default, ends, 0), rw.emit(aten.unsqueeze.default, positions, 1)
    )
    group = rw.emit(aten.sum.dim_IntList, rw.emit(aten._to_copy.default, passed, dtype=torch.int64), [1])
    valid = rw.emit(aten.lt.Scalar, group, groups)
    group = rw.emit(aten.clamp.default, group, None, groups - 1)
    if _gathers(_val(a).shape[0], groups):  # (S, 1, K) @ (S, K, N): each row its own group's weight
        weights = rw.emit(aten.index.Tensor, b, [group])
        out = rw.emit(aten.bmm.default, rw.emit(aten.unsqueeze.default, a, 1), weights)
        out = rw.emit(aten.squeeze.dims, out, [1])
    else:  # (S, K) @ (G, K, N) -> (G, S, N), each row's own group picked
        every = rw.emit(aten.matmul.default, a, b)
        picks = rw.emit(
            aten.expand.default, rw.emit(aten.reshape.default, group, [1, -1, 1]), [1, -1, _val(b).shape[2]]
        )
        out = rw.emit(aten.squeeze.dims, rw.emit(aten.gather.default, every, 0, picks), [0])
    if bias is not None:
        out = rw.emit(aten.add.Tensor, out, rw.emit(aten.index.Tensor, bias, [group]))
    return rw.emit(aten.where.ScalarOther, rw.emit(aten.unsqueeze.default, valid, 1), out, 0.0)


def _gathers(rows, groups: int) -> bool:
    """Whether the rows (an int, or a SymInt: its largest value) never outnumber the groups."""
    if isinstance(rows, int):
        return rows <= groups
    upper = rows.node.shape_env.bound_sympy(rows.node.expr).upper
    return upper.is_finite and int(upper) <= groups
