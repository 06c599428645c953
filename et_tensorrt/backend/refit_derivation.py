"""Derive a partition's REFIT_MAP: for every ONNX initializer, a recipe that rebuilds its exact bytes from the
embedded program's weights (et_tensorrt.format.refit_map), then verify every entry byte for byte.

ONNX export transforms weights on the way: constant folding transposes linear weights (``permute``), reshapes
and casts them (fp16/bf16 engines), fuses a batch norm into the convolution before it, deduplicates tied
weights. The recipes name those transforms; an initializer none of them explains is stored as raw bytes (and
counted in METADATA ``refit_raw_bytes``), so the map is complete whatever the exporter did.

The check is exact, not within a tolerance: the engine is built with REFIT_IDENTICAL, and every recipe step is
exact (permute, reshape) or correctly rounded (cast; the batch-norm steps use numpy's IEEE arithmetic, as the
exporter's fold does: see et_tensorrt.format.refit_map), so a recipe's bytes do not depend on the CPU that runs it.

The weights are read where they are, a slab at a time, never copied whole (a large model's partitions hold
gigabytes): an initializer that *is* a weight (the export kept the program's tensor) is recognized by its memory
without reading it; fingerprints and comparisons run over slabs of :data:`_SLAB` elements, casting each slab only.
"""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from et_tensorrt.builder import onnx_weights
from et_tensorrt.errors import EngineBuildError
from et_tensorrt.format import refit_map as rm
from et_tensorrt.format.blob import Weight, scalar_type_code

if TYPE_CHECKING:
    from et_tensorrt.builder.onnx_export import OnnxExport

logger = logging.getLogger("et_tensorrt")

_MAX_PERMUTE_RANK = 4  # transposes tried for sources up to this rank (24 orders)
_SLAB = 1 << 22  # elements read at a time: fingerprints and comparisons never copy a whole weight


@dataclass
class RefitPlan:
    entries: list[rm.Entry]  # as written (RAW offsets into ``payload``)
    payload: bytes  # the REFIT_MAP section
    raw_bytes: int  # bytes stored raw (not rebuilt from WEIGHTS)


def onnx_initializers(export: OnnxExport) -> list[tuple[str, torch.Tensor]]:
    """(name, tensor) of every initializer of the export's ONNX model, as the builder saw them (the external
    ones are the export's tensors, not copies: builder/onnx_weights.py)."""
    try:
        return list(onnx_weights.initializers(export))
    except EngineBuildError as exc:
        raise EngineBuildError(f"{exc}; a refit map cannot carry it: lower with weights='both'") from exc


def _batch_norms(ep) -> list[dict]:
    """The program's (conv or linear) -> batch norm pairs, by WEIGHTS name: ONNX export folds these."""
    names = {}
    for spec in ep.graph_signature.input_specs:
        if spec.target is not None:
            names[spec.arg.name] = spec.target
    found = []
    for node in ep.graph.nodes:
        if node.op != "call_function" or "batch_norm" not in str(node.target):
            continue
        args = list(node.args)
        if len(args) < 7 or not isinstance(args[0], torch.fx.Node):
            continue
        producer = args[0]
        params = [names.get(a.name) if isinstance(a, torch.fx.Node) else None for a in args[1:5]]
        if None in params or producer.op != "call_function":
            continue
        layer = [names.get(a.name) if isinstance(a, torch.fx.Node) else None for a in producer.args[1:3]]
        if layer[0] is None:
            continue
        gamma, beta, mean, var = params
        found.append(
            {
                "weight": layer[0],
                "bias": layer[1],
                "gamma": gamma,
                "beta": beta,
                "mean": mean,
                "var": var,
                "eps": float(args[6]),
            }
        )
    return found


def _fingerprint(t: torch.Tensor, dtype: torch.dtype | None = None) -> tuple[float, float]:
    """Order-independent (sum, sum of squares) in float64 of ``t`` (cast to ``dtype`` first): a cheap filter
    before exact comparisons, one slab at a time."""
    flat = t.detach().reshape(-1)  # a view of a contiguous tensor
    total = squares = 0.0
    for start in range(0, flat.numel(), _SLAB):
        x = flat[start : start + _SLAB]
        x = (x.to(dtype) if dtype is not None else x).to(torch.float64)
        total += float(x.sum())
        squares += float((x * x).sum())
    return total, squares


def _close(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return all(abs(x - y) <= 1e-6 * max(1.0, abs(x), abs(y)) for x, y in zip(a, b))


def _bytes_of(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().reshape(-1).view(torch.uint8)


def _shares(a: torch.Tensor, b: torch.Tensor) -> bool:
    """The same memory with the same layout and dtype: the same bytes, without reading them."""
    return (
        a.dtype == b.dtype
        and a.shape == b.shape
        and a.stride() == b.stride()
        and a.device == b.device
        and (a.numel() == 0 or a.data_ptr() == b.data_ptr())
    )


def _same(a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype | None = None) -> bool:
    """Same dtype, shape and bytes (NaN payloads and signed zeros included), ``a`` cast to ``dtype`` first; read a
    slab of leading rows at a time."""
    if dtype is None and _shares(a, b):
        return True
    if (dtype or a.dtype) != b.dtype or a.shape != b.shape:
        return False
    if a.dim() == 0 or a.numel() == 0:
        a = a.to(dtype) if dtype is not None else a
        return bool(torch.equal(_bytes_of(a), _bytes_of(b)))
    rows = max(1, _SLAB // max(1, a[0].numel()))
    for start in range(0, a.shape[0], rows):
        x, y = a[start : start + rows], b[start : start + rows]
        x = x.to(dtype) if dtype is not None else x
        if not torch.equal(_bytes_of(x), _bytes_of(y)):
            return False
    return True


class _Deriver:
    def __init__(self, weights: list[Weight], ep):
        self.weights = [w.tensor.detach().cpu() for w in weights]
        self.names = [w.name for w in weights]
        self.index = {n: i for i, n in enumerate(self.names)}
        self.by_numel: dict[int, list[int]] = {}
        for i, t in enumerate(self.weights):
            self.by_numel.setdefault(t.numel(), []).append(i)
        self._prints: dict[tuple[int, torch.dtype], tuple[float, float]] = {}
        self.batch_norms = _batch_norms(ep) if ep is not None else []

    def _print(self, i: int, dtype: torch.dtype) -> tuple[float, float]:
        key = (i, dtype)
        if key not in self._prints:
            self._prints[key] = _fingerprint(self.weights[i], dtype)
        return self._prints[key]

    def _candidates(self, name: str, target: torch.Tensor) -> list[int]:
        same_size = self.by_numel.get(target.numel(), [])
        # Names often survive export ("layers.0.bias", or under a module prefix): try those first.
        return sorted(same_size, key=lambda i: not (name == self.names[i] or name.endswith("." + self.names[i])))

    def derive(self, name: str, target: torch.Tensor) -> tuple[rm.Step, ...] | None:
        tdtype = scalar_type_code(target.dtype)
        candidates = self._candidates(name, target)
        for i in candidates:  # the export kept the program's own tensor: recognized without reading it
            source = self.weights[i]
            if _shares(source, target) or (source.is_contiguous() and _shares(source.reshape(target.shape), target)):
                reshape = [] if source.shape == target.shape else [rm.Step(rm.RESHAPE, dims=tuple(target.shape))]
                return (rm.Step(rm.SOURCE, weight=i), *reshape)
        want = _fingerprint(target) if target.numel() else None
        for i in candidates:
            source = self.weights[i]
            if want is not None and not _close(self._print(i, target.dtype), want):
                continue
            steps = [rm.Step(rm.SOURCE, weight=i)]
            cast = target.dtype if source.dtype != target.dtype else None  # slab by slab, in _same
            if cast is not None:
                steps.append(rm.Step(rm.CAST, dtype=tdtype))
            orders = [tuple(range(source.dim()))]
            if 2 <= source.dim() <= _MAX_PERMUTE_RANK:
                orders += [p for p in itertools.permutations(range(source.dim())) if p != orders[0]]
            for order in orders:
                moved = source.permute(order)
                if tuple(moved.shape) == tuple(target.shape):
                    got, extra = moved, []
                else:  # (a copy, unless the source is contiguous and kept in order)
                    got, extra = moved.reshape(target.shape), [rm.Step(rm.RESHAPE, dims=tuple(target.shape))]
                if _same(got, target, cast):
                    perm = [] if order == orders[0] else [rm.Step(rm.PERMUTE, dims=order)]
                    return tuple(steps + perm + extra)
        return self._derive_batch_norm(target, tdtype)

    def _derive_batch_norm(self, target: torch.Tensor, tdtype: int) -> tuple[rm.Step, ...] | None:
        for bn in self.batch_norms:
            idx = {k: self.index[v] for k, v in bn.items() if isinstance(v, str) and v in self.index}
            if len(idx) < 5:
                continue
            eps = float(torch.tensor(bn["eps"], dtype=torch.float32))
            w = self.weights[idx["weight"]]
            cast = [] if w.dtype == target.dtype else [rm.Step(rm.CAST, dtype=tdtype)]
            if w.shape == target.shape:
                for axis in (0, 1):
                    steps = (
                        rm.Step(rm.SOURCE, weight=idx["weight"]),
                        *cast,
                        rm.Step(rm.BN_SCALE, params=(idx["gamma"], idx["var"]), eps=eps, axis=axis),
                    )
                    if self._check(steps, target, tdtype):
                        return steps
            params = (idx["gamma"], idx["var"], idx["mean"], idx["beta"])
            if target.shape == self.weights[idx["mean"]].shape:
                if "bias" in idx:
                    b = self.weights[idx["bias"]]
                    bcast = [] if b.dtype == target.dtype else [rm.Step(rm.CAST, dtype=tdtype)]
                    steps = (
                        rm.Step(rm.SOURCE, weight=idx["bias"]),
                        *bcast,
                        rm.Step(rm.BN_SHIFT, params=params, eps=eps),
                    )
                else:
                    steps = (rm.Step(rm.BN_SHIFT, params=params, eps=eps, zero=True),)
                if self._check(steps, target, tdtype):
                    return steps
        return None

    def _check(self, steps, target: torch.Tensor, tdtype: int) -> bool:
        entry = rm.Entry("?", tdtype, tuple(target.shape), tuple(steps))
        try:
            return _same(rm.rebuild(entry, self.weights, b""), target)
        except Exception:  # noqa: BLE001 - a candidate that does not apply
            return False


def derive_refit_map(export: OnnxExport, weights: list[Weight], ep=None) -> RefitPlan:
    """The REFIT_MAP of an ONNX model built from a program with these WEIGHTS (``ep``: the aten program,
    for the batch norms export folds)."""
    deriver = _Deriver(weights, ep)
    entries, raw, raw_bytes = [], [], 0
    for name, target in onnx_initializers(export):
        steps = deriver.derive(name, target)
        if steps is None:
            data = target.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes() if target.numel() else b""
            steps = (rm.Step(rm.RAW, nbytes=len(data)),)
            raw.append(data)
            raw_bytes += len(data)
        entries.append(rm.Entry(name, scalar_type_code(target.dtype), tuple(target.shape), steps))
    payload, entries = rm.encode(entries, raw)
    return RefitPlan(entries, payload, raw_bytes)


def verify_refit_map(
    export: OnnxExport,
    entries: list[rm.Entry],
    weights: list[torch.Tensor],
    refit_map: bytes | memoryview,
    weight_names: list[str] | None = None,
) -> None:
    """Rebuild every initializer from the map (as the runtime will) and compare its bytes with the ONNX
    model's; raises EngineBuildError naming the first initializer that is missing or differs."""
    by_name = {e.name: e for e in entries}
    names = weight_names or []
    for name, target in onnx_initializers(export):
        entry = by_name.get(name)
        if entry is None:
            raise EngineBuildError(
                f"refit map: ONNX initializer {name!r} has no entry; the stripped engine could "
                "not be refitted (lower with weights='both' and report this)"
            )
        try:
            got = rm.rebuild(entry, weights, refit_map)
        except Exception as e:
            raise EngineBuildError(
                f"refit map: initializer {name!r} ({rm.describe(entry, names)}) cannot be rebuilt: {e}"
            ) from e
        if not _same(got, target):
            raise EngineBuildError(
                f"refit map: initializer {name!r} rebuilt as {rm.describe(entry, names)} differs from the ONNX "
                f"model's bytes ({target.dtype} {tuple(target.shape)}); the engine would be refitted with wrong "
                "weights, so the lowering stops (lower with weights='both' and report this)"
            )
