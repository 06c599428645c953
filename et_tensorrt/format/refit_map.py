"""The REFIT_MAP section (docs/blob-format.md): how to rebuild every weight of a weight-stripped engine.

One entry per ONNX initializer the engine was built from (TensorRT names refittable weights after them): its
name, dtype and shape, and a short recipe of steps that rebuilds its exact bytes from the embedded program's
WEIGHTS (a source weight, then the transforms ONNX export applied: cast, permute, reshape, a folded batch
norm), or the initializer's own bytes where no recipe was found. :func:`encode` writes the payload; the C++
reader parses and checks it (``_reader.parse_blob``); :func:`rebuild` runs a recipe, the same at lowering time (to
verify every entry byte for byte against the ONNX model) and at init (to refit the engine).

The folded batch norm (``BN_*``) is computed as the exporter computes it (onnxscript's ``_fuse_batchnorm``
rewrite: numpy, in the weight's dtype) with numpy's IEEE ``+ - * / sqrt``, which are correctly rounded, so its
bytes depend only on the inputs, never on the CPU or a library's kernels. torch's float32 ``sqrt`` is not
correctly rounded on every CPU build (measured: 1 ULP off on ~14% of inputs, whatever ATEN_CPU_CAPABILITY),
so a torch recipe missed the exporter's bytes. The match stays exact (not within a tolerance) because the
engine is built with REFIT_IDENTICAL: TensorRT may rely on the refit weights being exactly the build's.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING

from et_tensorrt.errors import BlobFormatError
from et_tensorrt.format.dtypes import scalar_type_dtype

if TYPE_CHECKING:  # the table is read without them; running a recipe (rebuild) imports both
    import numpy as np
    import torch

# Step opcodes (u8). Each pops/pushes one tensor on a small stack; a recipe leaves exactly one.
SOURCE = 1  # push WEIGHTS entry `weight`
RAW = 2  # push `nbytes` bytes at `offset` (from the REFIT_MAP payload start) as the entry's dtype and shape
CAST = 3  # top = top.to(dtype)
PERMUTE = 4  # top = top.permute(dims)
RESHAPE = 5  # top = top.reshape(dims)
BN_SCALE = 6  # top = top * (gamma / sqrt(var + eps)) along `axis` (batch norm folded into a weight)
BN_SHIFT = 7  # top = (top - mean) * (gamma / sqrt(var + eps)) + beta (folded into a bias; `zero`: top = 0)
STEP_NAMES = {
    SOURCE: "source",
    RAW: "raw",
    CAST: "cast",
    PERMUTE: "permute",
    RESHAPE: "reshape",
    BN_SCALE: "bn_scale",
    BN_SHIFT: "bn_shift",
}

_HEAD = struct.Struct("<II")  # entry count, reserved
_ENTRY = struct.Struct("<HBBHH")  # name_len, dtype, rank, step_count, reserved
_STEP = struct.Struct("<BBH")  # op, small argument (dtype / rank / flags), reserved


@dataclass(frozen=True)
class Step:
    op: int
    weight: int = 0  # SOURCE
    offset: int = 0  # RAW
    nbytes: int = 0  # RAW
    dtype: int = 0  # CAST: ExecuTorch ScalarType code
    dims: tuple[int, ...] = ()  # PERMUTE / RESHAPE
    params: tuple[int, ...] = ()  # BN_SCALE: gamma, var; BN_SHIFT: gamma, var, mean, beta (WEIGHTS indexes)
    eps: float = 0.0  # BN_*: stored as f32
    axis: int = 0  # BN_SCALE
    zero: bool = False  # BN_SHIFT: start from zeros (the layer had no bias)


@dataclass(frozen=True)
class Entry:
    name: str  # the ONNX initializer (TensorRT weight) name
    dtype: int  # ExecuTorch ScalarType code
    sizes: tuple[int, ...]
    steps: tuple[Step, ...]

    @property
    def raw(self) -> bool:
        return any(s.op == RAW for s in self.steps)


def _encode_step(s: Step) -> bytes:
    if s.op == SOURCE:
        return _STEP.pack(SOURCE, 0, 0) + struct.pack("<I", s.weight)
    if s.op == RAW:
        return _STEP.pack(RAW, 0, 0) + struct.pack("<QQ", s.offset, s.nbytes)
    if s.op == CAST:
        return _STEP.pack(CAST, s.dtype, 0)
    if s.op in (PERMUTE, RESHAPE):
        return _STEP.pack(s.op, len(s.dims), 0) + struct.pack(f"<{len(s.dims)}q", *s.dims)
    if s.op == BN_SCALE:
        return _STEP.pack(BN_SCALE, 0, 0) + struct.pack("<IIfi", *s.params, s.eps, s.axis)
    if s.op == BN_SHIFT:
        return _STEP.pack(BN_SHIFT, int(s.zero), 0) + struct.pack("<IIIIf", *s.params, s.eps)
    raise BlobFormatError(f"REFIT_MAP: unknown step {s.op}")


def encode(entries: list[Entry], raw: list[bytes]) -> tuple[bytes, list[Entry]]:
    """(REFIT_MAP payload, the entries as written). ``raw``: the bytes each RAW step names, in order of
    appearance; their offsets are assigned here (64-aligned, after the table), so RAW steps come in with any
    offset and go out with the one written."""
    sized = []
    for e in entries:  # the table's size does not depend on offsets: lay it out first
        table_len = _ENTRY.size + len(e.name.encode("utf-8")) + 8 * len(e.sizes)
        sized.append(table_len + sum(len(_encode_step(s)) for s in e.steps))
    at = _HEAD.size + sum(sized)
    raw_iter = iter(raw)
    placed, datas = [], []
    for e in entries:
        steps = []
        for s in e.steps:
            if s.op == RAW:
                data = next(raw_iter)
                if len(data) != s.nbytes:
                    raise BlobFormatError(
                        f"REFIT_MAP entry {e.name!r}: {len(data)} raw bytes for a {s.nbytes}-byte step"
                    )
                at += (-at) % 64
                s = Step(RAW, offset=at if data else 0, nbytes=len(data))
                datas.append((at, data))
                at += len(data)
            steps.append(s)
        placed.append(Entry(e.name, e.dtype, e.sizes, tuple(steps)))
    out = bytearray(_HEAD.pack(len(placed), 0))
    for e in placed:
        name = e.name.encode("utf-8")
        out += _ENTRY.pack(len(name), e.dtype, len(e.sizes), len(e.steps), 0) + name
        out += struct.pack(f"<{len(e.sizes)}q", *e.sizes)
        for s in e.steps:
            out += _encode_step(s)
    for offset, data in datas:
        out += b"\0" * (offset - len(out))
        out += data
    return bytes(out), placed


def from_parsed(parsed: list[dict]) -> list[Entry]:
    """The reader's ``refit_entries`` (the C++ reader checked them) as :class:`Entry` objects."""
    out = []
    for e in parsed:
        steps = tuple(
            Step(
                s["op"],
                s.get("weight", 0),
                s.get("offset", 0),
                s.get("nbytes", 0),
                s.get("dtype", 0),
                tuple(s.get("dims", ())),
                tuple(s.get("params", ())),
                s.get("eps", 0.0),
                s.get("axis", 0),
                bool(s.get("zero", False)),
            )
            for s in e["steps"]
        )
        out.append(Entry(e["name"], e["dtype"], tuple(e["sizes"]), steps))
    return out


def _numpy(t: torch.Tensor, dtype: torch.dtype) -> np.ndarray:
    """``t`` cast to ``dtype`` (by torch, as the exporter casts the module), as the array the exporter's fold sees
    (bfloat16: ml_dtypes', as onnx-ir hands it)."""
    import torch

    t = t.detach().cpu().to(dtype).contiguous()
    if dtype == torch.bfloat16:
        import ml_dtypes

        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def _torch(a: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    import numpy as np
    import torch

    if dtype == torch.bfloat16:
        return torch.from_numpy(np.ascontiguousarray(a).view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(a))


def _bn_factor(gamma: np.ndarray, var: np.ndarray, eps: float) -> np.ndarray:
    # onnxscript's fusion: gamma / np.sqrt(var + eps), eps (a Python float, the f32 attribute) taking var's dtype
    # (numpy >= 2, NEP 50); cast explicitly here so this side does not depend on numpy's promotion rules.
    import numpy as np

    return gamma / np.sqrt(var + var.dtype.type(eps))


def _bn_scale(top: torch.Tensor, gamma: torch.Tensor, var: torch.Tensor, eps: float, axis: int) -> torch.Tensor:
    """``weights * reshape(gamma / sqrt(var + eps))`` along ``axis``, in ``top``'s dtype, as the exporter does."""
    dtype = top.dtype
    factor = _bn_factor(_numpy(gamma, dtype), _numpy(var, dtype), eps)
    shape = [1] * top.dim()
    shape[axis] = -1
    return _torch(_numpy(top, dtype) * factor.reshape(shape), dtype)


def _bn_shift(top: torch.Tensor, params: list[torch.Tensor], eps: float) -> torch.Tensor:
    """``(bias - mean) * (gamma / sqrt(var + eps)) + beta`` in ``top``'s dtype, as the exporter does."""
    dtype = top.dtype
    gamma, var, mean, beta = (_numpy(p, dtype) for p in params)
    return _torch((_numpy(top, dtype) - mean) * _bn_factor(gamma, var, eps) + beta, dtype)


def rebuild(entry: Entry, weights: list[torch.Tensor], refit_map: bytes | memoryview) -> torch.Tensor:
    """The entry's tensor (contiguous, host): its recipe run over ``weights`` (the WEIGHTS entries, in table
    order) and the REFIT_MAP payload's RAW bytes. Raises BlobFormatError when the result is not the entry's
    declared dtype and shape."""
    import torch

    dtype = scalar_type_dtype(entry.dtype)
    stack: list[torch.Tensor] = []
    for s in entry.steps:
        if s.op == SOURCE:
            stack.append(weights[s.weight])
        elif s.op == RAW:
            data = bytearray(memoryview(refit_map)[s.offset : s.offset + s.nbytes])
            t = torch.frombuffer(data, dtype=torch.uint8) if data else torch.empty(0, dtype=torch.uint8)
            stack.append(t.view(dtype).reshape(entry.sizes))
        elif s.op == CAST:
            stack.append(stack.pop().to(scalar_type_dtype(s.dtype)))
        elif s.op == PERMUTE:
            stack.append(stack.pop().permute(s.dims))
        elif s.op == RESHAPE:
            stack.append(stack.pop().reshape(s.dims))
        elif s.op == BN_SCALE:
            gamma, var = (weights[i] for i in s.params)
            stack.append(_bn_scale(stack.pop(), gamma, var, s.eps, s.axis))
        elif s.op == BN_SHIFT:
            params = [weights[i] for i in s.params]  # gamma, var, mean, beta
            top = torch.zeros_like(params[2], dtype=dtype) if s.zero else stack.pop()
            stack.append(_bn_shift(top, params, s.eps))
        else:  # the reader refuses unknown steps; kept for hand-made entries
            raise BlobFormatError(f"REFIT_MAP entry {entry.name!r}: unknown step {s.op}")
    if len(stack) != 1:
        raise BlobFormatError(f"REFIT_MAP entry {entry.name!r}: its recipe leaves {len(stack)} tensors, not 1")
    out = stack[0]
    if out.dtype != dtype or tuple(out.shape) != tuple(entry.sizes):
        raise BlobFormatError(
            f"REFIT_MAP entry {entry.name!r}: its recipe makes {out.dtype} {tuple(out.shape)}, the entry declares "
            f"{dtype} {tuple(entry.sizes)}"
        )
    return out.contiguous()


def describe(entry: Entry, weight_names: list[str]) -> str:
    """``permute(cast(layers.0.weight))``-style text of a recipe (inspection, error messages)."""
    text = ""
    for s in entry.steps:
        name = STEP_NAMES.get(s.op, str(s.op))
        if s.op == SOURCE:
            text = weight_names[s.weight] if s.weight < len(weight_names) else f"#{s.weight}"
        elif s.op == RAW:
            text = f"raw[{s.nbytes} B]"
        elif s.op == BN_SHIFT and s.zero:
            text = "bn_shift(0)"
        else:
            text = f"{name}({text})"
    return text
