"""The blob's INPUT_GUARDS section (docs/blob-format.md): what the partition's program requires of its arguments
beyond each one's own dim ranges (the I/O table), as torch.export recorded it, so the delegate refuses a call the
exported program would refuse (its "Guard failed: ...") before anything runs, whichever runtime calls it.

* Dims: each entry says that one dim of one argument (or the value of a size argument) is ``scale * symbol +
  offset``; entries of one symbol must agree (``input_ids.size(1) == cache_position.size(0)``: both are ``s0``).
* Indices: every value of an integer argument must lie in ``[0, bound)``: the rows of the table it looks up
  (a token id and its embedding), which the program does not check (TensorRT's gather does not either).

Written here, read by the C++ reader (extension/format/blob_reader.cpp, ``read_input_guards``), checked by the
delegate before each call (extension/runtime/input_guards.cpp).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from et_tensorrt.errors import BlobFormatError

VALUE = -1  # a dim entry's ``dim`` for the value of a size argument (an integer, not a tensor)

_HEAD = struct.Struct("<II")  # dim entry count, index entry count
_DIM = struct.Struct("<IiIIqq")  # argument, dim, symbol, reserved, scale, offset
_INDEX = struct.Struct("<IIq")  # argument, reserved, bound


@dataclass(frozen=True)
class DimGuard:
    argument: int  # the delegate's argument (its input order: tensors and sizes)
    dim: int  # VALUE for a size argument
    symbol: int  # entries of one symbol are one unknown
    scale: int = 1  # >= 1
    offset: int = 0
    name: str = ""  # the symbol as torch.export named it (not stored; messages on the writer's side)


@dataclass(frozen=True)
class IndexGuard:
    argument: int  # an integer tensor argument
    bound: int  # every value in [0, bound)


@dataclass(frozen=True)
class InputGuards:
    dims: tuple[DimGuard, ...] = ()
    indices: tuple[IndexGuard, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.dims or self.indices)


def encode(guards: InputGuards) -> bytes:
    out = [_HEAD.pack(len(guards.dims), len(guards.indices))]
    for g in guards.dims:
        if g.scale < 1 or g.dim < VALUE:
            raise BlobFormatError(f"input guard {g}: the scale must be >= 1 and the dim >= {VALUE}")
        out.append(_DIM.pack(g.argument, g.dim, g.symbol, 0, g.scale, g.offset))
    for g in guards.indices:
        if g.bound < 1:
            raise BlobFormatError(f"index guard {g}: the bound must be >= 1")
        out.append(_INDEX.pack(g.argument, 0, g.bound))
    return b"".join(out)


def from_parsed(parsed: dict | None) -> InputGuards:
    """The guards from the C++ reader's parse (``blob_to_python``'s ``input_guards``; None: no section)."""
    if not parsed:
        return InputGuards()
    return InputGuards(
        tuple(DimGuard(d["argument"], d["dim"], d["symbol"], d["scale"], d["offset"]) for d in parsed["dims"]),
        tuple(IndexGuard(i["argument"], i["bound"]) for i in parsed["indices"]),
    )


def describe(guards: InputGuards) -> list[str]:
    """One line per symbol and per index guard, for ``inspect``: "input 0.size(1) = s0, input 1.size(0) = s0"."""

    def term(g: DimGuard) -> str:
        where = f"input {g.argument}" + ("" if g.dim == VALUE else f".size({g.dim})")
        expr = f"s{g.symbol}" if g.scale == 1 else f"{g.scale}*s{g.symbol}"
        return f"{where} = {expr}" + (f" {'+' if g.offset > 0 else '-'} {abs(g.offset)}" if g.offset else "")

    lines = [", ".join(term(g) for g in guards.dims if g.symbol == s) for s in sorted({g.symbol for g in guards.dims})]
    return lines + [f"input {g.argument}: values in 0..{g.bound - 1}" for g in guards.indices]
