"""Rewrite delegated ops that ONNX or TensorRT lack into equal ones they have, in the aten partition program.

Which nodes can be rewritten is decided in ``partition/argument_limits.py`` (the partitioner delegates only
those); here they are rewritten, before the ONNX export. The same program is embedded in the blob, so the
PyTorch fallback computes what the engine computes.

* adaptive pooling with equal windows -> the plain pooling it equals;
* 2-D adaptive average pooling with any windows -> ``P_h @ x @ P_w^T`` (averaging matrices: constants over
  static sizes, computed from the size over dynamic ones);
* ``index_put`` with a boolean mask -> ``where`` (a static-shape op; the mask form needs NonZero);
* ``index_put(..., accumulate=True)`` -> ``x + onehot(indices)^T @ values`` (ScatterND has no reduction);
* negative integer indices of ``index`` / ``index_put`` on static dims -> ``index + size`` (ONNX allows
  negative indices, TensorRT's GatherND/ScatterND do not promise to);
* ``as_strided`` that equals a reshape -> that reshape (ONNX has no strides);
* ``copy(dst, src)`` with a smaller ``src`` -> ``copy(dst, expand_as(src, dst))`` (the exporter's copy is a
  cast only: a broadcasting ``src`` would keep its own shape).
"""

from __future__ import annotations

import math

import torch
from torch.export.graph_signature import InputKind, InputSpec, TensorArgument

from et_tensorrt.errors import EngineBuildError
from et_tensorrt.partition.argument_limits import (
    ADAPTIVE_POOLING,
    adaptive_avg_pool2d_sizes,
    adaptive_pool_window,
    as_strided_reshape,
    index_put_accumulate_dims,
    index_put_mask,
)

aten = torch.ops.aten

# Every target the rewrites below write (beyond the plain poolings of ``ADAPTIVE_POOLING``): the embedded
# program's safe loader allows them (et_tensorrt/embedded_program/allowed_ops.py). A new rewrite adds its own.
TARGETS = (
    "aten._to_copy.default",
    "aten.add.Scalar",
    "aten.add.Tensor",
    "aten.arange.default",
    "aten.div.Tensor",
    "aten.eq.Tensor",
    "aten.expand.default",
    "aten.expand_as.default",
    "aten.logical_and.default",
    "aten.lt.Scalar",
    "aten.lt.Tensor",
    "aten.matmul.default",
    "aten.mm.default",
    "aten.mul.Scalar",
    "aten.mul.Tensor",
    "aten.permute.default",
    "aten.reshape.default",
    "aten.squeeze.dims",
    "aten.sum.dim_IntList",
    "aten.sym_size.int",
    "aten.unsqueeze.default",
    "aten.where.self",
    "aten.zeros_like.default",
)


class Rewriter:
    """Emits nodes (with ``meta["val"]``) before a node of an aten graph, and constants it lifts."""

    def __init__(self, gm: torch.fx.GraphModule, user_inputs: set[str]):
        from torch._guards import detect_fake_mode

        self.gm = gm
        self.user_inputs = user_inputs  # placeholder names of the program's user inputs
        vals = [n.meta.get("val") for n in gm.graph.nodes if n.op in ("placeholder", "call_function")]
        self.fake_mode = detect_fake_mode([v for v in vals if isinstance(v, torch.Tensor)])
        if self.fake_mode is None:  # a program traced with real tensors as metadata
            from torch._subclasses.fake_tensor import FakeTensorMode

            self.fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
        self.constants: dict[str, torch.Tensor] = {}  # lifted constants added to the program
        self.before: torch.fx.Node | None = None

    def emit(self, op, *args, **kwargs) -> torch.fx.Node:
        with self.gm.graph.inserting_before(self.before):
            node = self.gm.graph.call_function(op, args, kwargs)
        meta = torch.fx.node.map_arg((args, kwargs), lambda n: n.meta["val"])
        with self.fake_mode:
            node.meta["val"] = op(*meta[0], **meta[1])
        return node

    def constant(self, stem: str, value: torch.Tensor) -> torch.fx.Node:
        """A lifted constant tensor placeholder (the ONNX exporter makes it an initializer)."""
        name = stem
        taken = {n.name for n in self.gm.graph.nodes} | set(self.constants)
        i = 0
        while name in taken:
            i += 1
            name = f"{stem}_{i}"
        # torch.export's order: parameters, buffers, constants, then user inputs.
        placeholders = [n for n in self.gm.graph.nodes if n.op == "placeholder"]
        first_user = next((n for n in placeholders if n.name in self.user_inputs), None)
        if first_user is not None:
            with self.gm.graph.inserting_before(first_user):
                node = self.gm.graph.placeholder(name)
        else:
            with (
                self.gm.graph.inserting_after(placeholders[-1])
                if placeholders
                else self.gm.graph.inserting_before(self.before)
            ):
                node = self.gm.graph.placeholder(name)
        node.meta["val"] = self.fake_mode.from_tensor(value)
        self.constants[name] = value
        return node


def lift_constants(rewriter: Rewriter, signature, constants: dict) -> None:
    """Record the rewriter's constants in the program's signature (in placeholder order) and constants."""
    if not rewriter.constants:
        return
    specs = {getattr(s.arg, "name", None): s for s in signature.input_specs}
    for name, value in rewriter.constants.items():
        specs[name] = InputSpec(kind=InputKind.CONSTANT_TENSOR, arg=TensorArgument(name=name), target=name)
        constants[name] = value
    placeholders = [n.name for n in rewriter.gm.graph.nodes if n.op == "placeholder"]
    signature.input_specs[:] = [specs[name] for name in placeholders]


def rewrite(node: torch.fx.Node, rw: Rewriter) -> None:
    rw.before = node
    _adaptive_pooling(node, rw)
    if node.target in (aten.index.Tensor, aten.index_put.default):
        _non_negative_indices(node, rw)
    if node.target is aten.index_put.default:
        _index_put(node, rw)
    if node.target is aten.copy.default:
        _broadcast_copy_source(node, rw)
    if node.target in (aten.as_strided.default, aten.as_strided_copy.default):
        _as_strided_as_reshape(node)


def _as_strided_as_reshape(node: torch.fx.Node) -> None:
    sizes = as_strided_reshape(node)
    if sizes is None:
        raise EngineBuildError(f"{node.name}: this as_strided is not a reshape and cannot be converted")
    node.target, node.args, node.kwargs = aten.reshape.default, (node.args[0], sizes), {}


def _broadcast_copy_source(node: torch.fx.Node, rw: Rewriter) -> None:
    dst, src = node.args[0], node.args[1]
    if not isinstance(src, torch.fx.Node) or src.meta["val"].shape == dst.meta["val"].shape:
        return
    node.args = (dst, rw.emit(aten.expand_as.default, src, dst), *node.args[2:])


# ---------------------------------------------------------------------------------- adaptive pooling


def _adaptive_pooling(node: torch.fx.Node, rw: Rewriter) -> None:
    """Equal windows: the plain pooling. Max pooling keeps its (values, indices) pair; indices are flat
    positions in the input in both. Other 2-D average pooling: two matrix products."""
    plain = ADAPTIVE_POOLING.get(str(node.target))
    if plain is None:
        return
    window = adaptive_pool_window(node)
    if window is not None:
        kernel, stride = window
        packet, overload = plain.split(".")[1:]
        node.target = getattr(getattr(aten, packet), overload)
        node.args, node.kwargs = (node.args[0], list(kernel), list(stride)), {}
        return
    sizes = adaptive_avg_pool2d_sizes(node)
    if sizes is None:
        raise EngineBuildError(f"{node.name}: adaptive pooling over these sizes cannot be converted")
    (h, w), (oh, ow) = sizes
    x = node.args[0]
    dtype = x.meta["val"].dtype
    rows = _averaging(rw, x, -2, h, oh, dtype)  # (OH, H)
    cols = _averaging(rw, x, -1, w, ow, dtype, transposed=True)  # (W, OW)
    pooled_rows = rw.emit(aten.matmul.default, rows, x)  # (..., OH, W)
    node.target, node.args, node.kwargs = aten.matmul.default, (pooled_rows, cols), {}


def _averaging(
    rw: Rewriter, x: torch.fx.Node, dim: int, size, out: int, dtype: torch.dtype, transposed: bool = False
) -> torch.fx.Node:
    """The (out, size) averaging matrix of ``x``'s dim ``dim`` (``transposed``: (size, out)): a constant over a
    static size; over a dynamic one, computed from the size in the graph (the engine computes it per shape)."""
    if isinstance(size, int):
        matrix = averaging_matrix(size, out, dtype)
        stem = "adaptive_pool_cols" if transposed else "adaptive_pool_rows"
        return rw.constant(stem, matrix.t().contiguous() if transposed else matrix)
    # Window i holds position j iff floor(i*size/out) <= j < ceil((i+1)*size/out), that is
    # i*size < (j+1)*out and j*out < (i+1)*size: integer comparisons, exact for every size.
    n = rw.emit(aten.sym_size.int, x, x.meta["val"].dim() + dim)
    j = rw.emit(aten.unsqueeze.default, rw.emit(aten.arange.default, n, dtype=torch.int64), 0)  # (1, size)
    i = rw.constant("adaptive_pool_windows", torch.arange(out, dtype=torch.int64).reshape(out, 1))  # (out, 1)
    starts_before = rw.emit(
        aten.lt.Tensor, rw.emit(aten.mul.Tensor, i, n), rw.emit(aten.mul.Scalar, rw.emit(aten.add.Scalar, j, 1), out)
    )
    ends_after = rw.emit(
        aten.lt.Tensor, rw.emit(aten.mul.Scalar, j, out), rw.emit(aten.mul.Tensor, rw.emit(aten.add.Scalar, i, 1), n)
    )
    inside = rw.emit(aten._to_copy.default, rw.emit(aten.logical_and.default, starts_before, ends_after), dtype=dtype)
    matrix = rw.emit(aten.div.Tensor, inside, rw.emit(aten.sum.dim_IntList, inside, [-1], True))
    return rw.emit(aten.permute.default, matrix, [1, 0]) if transposed else matrix


def averaging_matrix(size: int, out: int, dtype: torch.dtype) -> torch.Tensor:
    """(out, size): row i averages PyTorch's adaptive window i, [floor(i*size/out), ceil((i+1)*size/out))."""
    matrix = torch.zeros(out, size, dtype=torch.float64)
    for i in range(out):
        start, end = (i * size) // out, math.ceil((i + 1) * size / out)
        matrix[i, start:end] = 1.0 / (end - start)
    return matrix.to(dtype)


# ---------------------------------------------------------------------------------- indexing


def _non_negative_indices(node: torch.fx.Node, rw: Rewriter) -> None:
    """``i`` -> ``where(i < 0, i + size, i)`` for each integer index on a static dim."""
    x = node.args[0].meta["val"]
    indices = list(node.args[1])
    changed = False
    for dim, index in enumerate(indices):
        val = index.meta.get("val") if isinstance(index, torch.fx.Node) else None
        if not isinstance(val, torch.Tensor) or val.dtype not in (torch.int64, torch.int32):
            continue
        size = x.shape[dim]
        if not isinstance(size, int):  # a dynamic dim: left as it is (no ONNX-side size here)
            continue
        negative = rw.emit(aten.lt.Scalar, index, 0)
        wrapped = rw.emit(aten.add.Scalar, index, size)
        indices[dim] = rw.emit(aten.where.self, negative, wrapped, index)
        changed = True
    if changed:
        node.args = (node.args[0], indices, *node.args[2:])


def _index_put(node: torch.fx.Node, rw: Rewriter) -> None:
    accumulate = node.args[3] if len(node.args) > 3 else node.kwargs.get("accumulate", False)
    indices = list(node.args[1])
    if any(i is not None and i.meta["val"].dtype == torch.bool for i in indices):
        _masked_put(node, rw, accumulate)
    elif accumulate:
        _accumulated_put(node, rw)


def _masked_put(node: torch.fx.Node, rw: Rewriter, accumulate: bool) -> None:
    """``x[..., mask, ...] = v`` -> ``where(mask, v, x)`` with mask and v aligned to x's dims."""
    start = index_put_mask(node)
    if start is None:
        raise EngineBuildError(f"{node.name}: index_put with this boolean mask cannot be converted")
    x_node, values = node.args[0], node.args[2]
    mask = node.args[1][start]
    x, m, v = x_node.meta["val"], mask.meta["val"], values.meta["val"]
    rest = x.dim() - start - m.dim()
    mask_b = mask  # (*mask, 1, ..., 1): lines up with x from dim `start` (unsqueeze: no sizes, dynamic ones too)
    for _ in range(rest):
        mask_b = rw.emit(aten.unsqueeze.default, mask_b, -1)
    # values line up with (*x.shape[:start], selected, *rest): drop the size-1 "selected" dim, put the
    # mask's dims in its place.
    values_b = values
    selected = v.dim() - rest - 1
    if selected >= 0:
        values_b = rw.emit(aten.squeeze.dims, values_b, [selected])
        for _ in range(m.dim()):
            values_b = rw.emit(aten.unsqueeze.default, values_b, selected)
    if v.dtype != x.dtype:
        values_b = rw.emit(aten._to_copy.default, values_b, dtype=x.dtype)
    if accumulate:
        zero = rw.emit(aten.zeros_like.default, x_node)
        added = rw.emit(aten.where.self, mask_b, values_b, zero)
        node.target, node.args, node.kwargs = aten.add.Tensor, (x_node, added), {}
    else:
        node.target, node.args, node.kwargs = aten.where.self, (mask_b, values_b, x_node), {}


def _accumulated_put(node: torch.fx.Node, rw: Rewriter) -> None:
    """``x.index_put(indices, v, accumulate=True)`` with integer indices for the leading dims ->
    ``(x.view(N, R) + onehot(flat index)^T @ v.view(K, R)).view(x.shape)``: repeated indices add up, as in
    PyTorch. N: elements of the indexed dims, K: of the broadcast indices, R: of the other dims."""
    count = index_put_accumulate_dims(node)
    if count is None:
        raise EngineBuildError(f"{node.name}: index_put with accumulate=True cannot be converted here")
    x_node, values = node.args[0], node.args[2]
    x = x_node.meta["val"]
    indices = list(node.args[1])
    broadcast = list(torch.broadcast_shapes(*[i.meta["val"].shape for i in indices]))
    indexed = list(x.shape[:count])
    rest = list(x.shape[count:])
    n, k, r = math.prod(indexed), math.prod(broadcast), math.prod(rest)
    flat = None
    for dim, index in enumerate(indices):  # row-major flat position in the indexed dims
        index = rw.emit(aten._to_copy.default, index, dtype=torch.int64)
        stride = math.prod(indexed[dim + 1 :])
        term = rw.emit(aten.mul.Scalar, index, stride) if stride != 1 else index
        flat = term if flat is None else rw.emit(aten.add.Tensor, flat, term)
    flat = rw.emit(aten.expand.default, flat, broadcast)
    flat = rw.emit(aten.reshape.default, flat, [1, k])
    positions = rw.emit(aten.arange.default, n, dtype=torch.int64, device=x.device)
    positions = rw.emit(aten.reshape.default, positions, [n, 1])
    onehot = rw.emit(aten._to_copy.default, rw.emit(aten.eq.Tensor, positions, flat), dtype=x.dtype)  # (N, K)
    v = values
    if values.meta["val"].dtype != x.dtype:
        v = rw.emit(aten._to_copy.default, v, dtype=x.dtype)
    v = rw.emit(aten.expand.default, v, broadcast + rest)
    v = rw.emit(aten.reshape.default, v, [k, r])
    scattered = rw.emit(aten.mm.default, onehot, v)  # (N, R)
    flat_x = rw.emit(aten.reshape.default, x_node, [n, r])
    summed = rw.emit(aten.add.Tensor, flat_x, scattered)
    node.target, node.args, node.kwargs = aten.reshape.default, (summed, list(x.shape)), {}
