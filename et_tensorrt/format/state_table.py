"""The blob's STATE section (docs/blob-format.md): the state tensors a delegate owns across calls.

One entry per mutable buffer the partition took over (a KV cache, a counter): its name, dtype, shape, initial
contents (zeros, or the bytes), the engine input and output that carry it, whether the engine updates it in
place (its output aliases its input: one device buffer) or returns the new value for the delegate to copy
back, the guard the delegate checks before each call (where the write positions come from), and the program's
methods whose delegates declare the same state (each binds the one buffer the loaded program holds). Written here,
read by the C++ reader (extension/format/blob_reader.cpp, ``read_state_table``) with bounds checks, and
handed to the executors parsed.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from et_tensorrt.errors import BlobFormatError
from et_tensorrt.format.dtypes import element_size, scalar_type_dtype

if TYPE_CHECKING:  # reading the table imports no torch; making a state's tensor does
    import torch

UPDATE_IN_PLACE = 0  # the engine's output aliases its input (TensorScatter -> IKVCacheUpdateLayer)
UPDATE_WRITE_BACK = 1  # the engine returns the new value; the delegate copies it into the state
INIT_ZEROS = 0
INIT_BYTES = 1
NO_INPUT = -1
FLAG_SHARED = 1  # the entry ends with the methods that share the state: u16 count, per method u16 length + UTF-8

_HEAD = struct.Struct("<II")
# name_len, input_len, output_len, dtype, rank, update, init, position_input, position_kind, flags,
# length_input, length_dim, length_value
_FIXED = struct.Struct("<HHHBBBBhBBhhq")


@dataclass(frozen=True)
class StateEntry:
    name: str  # the buffer's fully qualified name
    dtype: int  # ExecuTorch ScalarType code (format/dtypes.py)
    shape: tuple[int, ...]
    input_name: str  # the engine's binding names ("" when no engine was built)
    output_name: str
    update: int  # UPDATE_IN_PLACE or UPDATE_WRITE_BACK
    initial: bytes | None  # None: zeros
    position_input: int = NO_INPUT  # the guard (state_lifting.PositionGuard), NO_INPUT without one
    position_kind: int = 0
    length_input: int = NO_INPUT
    length_dim: int = 0
    length_value: int = 0
    # The program's methods whose delegates declare this state (sorted; () when only this delegate's method has it):
    # the loaded program holds one buffer under ``name`` that all of them bind.
    methods: tuple[str, ...] = ()

    @property
    def shared(self) -> bool:
        return len(self.methods) > 1

    @property
    def in_place(self) -> bool:
        return self.update == UPDATE_IN_PLACE

    @property
    def nbytes(self) -> int:
        n = element_size(self.dtype)
        for d in self.shape:
            n *= d
        return n

    def initial_tensor(self, device: torch.device) -> torch.Tensor:
        """A fresh tensor holding the initial contents on ``device`` (owned: never a view of the blob)."""
        import torch

        dtype = scalar_type_dtype(self.dtype)
        if self.initial is None:
            return torch.zeros(self.shape, dtype=dtype, device=device)
        host = torch.frombuffer(bytearray(self.initial), dtype=dtype).reshape(self.shape)
        return host.to(device, copy=True)


def encode_state_table(entries: Sequence[StateEntry]) -> bytes:
    out = [_HEAD.pack(len(entries), 0)]
    for e in entries:
        if not isinstance(e.dtype, int):
            raise BlobFormatError(
                f"state {e.name!r}: dtype {e.dtype!r} is not an ExecuTorch ScalarType code "
                "(format.dtypes.scalar_type_code gives it)"
            )
        name, inp, outp = (s.encode("utf-8") for s in (e.name, e.input_name, e.output_name))
        init = INIT_ZEROS if e.initial is None else INIT_BYTES
        out.append(
            _FIXED.pack(
                len(name),
                len(inp),
                len(outp),
                e.dtype,
                len(e.shape),
                e.update,
                init,
                e.position_input,
                e.position_kind,
                FLAG_SHARED if e.shared else 0,
                e.length_input,
                e.length_dim,
                e.length_value,
            )
        )
        out += [name, inp, outp, struct.pack(f"<{len(e.shape)}q", *e.shape)]
        if e.initial is not None:
            out += [struct.pack("<Q", len(e.initial)), e.initial]
        if e.shared:
            out.append(struct.pack("<H", len(e.methods)))
            for method in e.methods:
                encoded = method.encode("utf-8")
                out += [struct.pack("<H", len(encoded)), encoded]
    return b"".join(out)


def initial_bytes(t: torch.Tensor) -> bytes | None:
    """None when ``t`` is all zeros (the table then stores nothing), else its contiguous bytes (a 0-dim state, a
    counter, too: flattened first, as a 0-dim tensor has no byte view)."""
    import torch

    if not bool(t.any()):
        return None
    return t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def from_parsed(rows: Sequence[dict]) -> list[StateEntry]:
    """The entries from the C++ reader's parse (``blob_to_python``'s ``states``)."""
    return [
        StateEntry(
            name=r["name"],
            dtype=r["dtype"],
            shape=tuple(r["shape"]),
            input_name=r["input_name"],
            output_name=r["output_name"],
            update=r["update"],
            initial=None if r["initial"] is None else bytes(r["initial"]),
            position_input=r["position_input"],
            position_kind=r["position_kind"],
            length_input=r["length_input"],
            length_dim=r["length_dim"],
            length_value=r["length_value"],
            methods=tuple(r.get("methods", ())),
        )
        for r in rows
    ]
