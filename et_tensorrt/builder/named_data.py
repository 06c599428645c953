"""Engines and weights as ExecuTorch named data: stored once per program, shared by its partitions and methods.

With ``named_data`` ``pte`` or ``ptd`` (compile_specs), a blob keeps neither its engine nor its weights' bytes:
its NAMED_DATA section (docs/blob-format.md) names the key of each, and ``preprocess`` hands the bytes to
ExecuTorch in its ``PreprocessResult.data_store_output`` (a ``NamedDataStore``, as XNNPACK and the CUDA backend
do). ExecuTorch merges the stores of every partition and method of a program: data under one key is stored
once, inside the .pte (``pte``) or in a .ptd beside it (``ptd``, the external tag :data:`EXTERNAL_TAG`). At
init the delegate reads each key from the program's ``NamedDataMap``: the weights are views of ExecuTorch's data
(a mapped .pte/.ptd), never a copy.

Keys are content digests (``et_tensorrt:`` + the SHA-256 of the bytes), so the same weight reached by two methods
(prefill and decode) or two partitions is one entry, and different bytes never share a key. A tensor's digest is
computed once per process (:func:`tensor_digest`): the build cache's key and the ONNX identity reuse it.
"""

from __future__ import annotations

import hashlib
import weakref

import torch
from executorch.exir._serialize._cord import FileBackedData

from et_tensorrt.builder.held_data import HeldData, TensorData
from et_tensorrt.format import blob as blob_mod

KEY_PREFIX = "et_tensorrt:"
EXTERNAL_TAG = "et_tensorrt"  # ExecuTorch's name for the .ptd (et_tensorrt.save names the file after the .pte)
ALIGNMENT = 64  # each datum's alignment in the .pte/.ptd: the weights are viewed in place

# (device, storage, offset, shape, strides, dtype) -> (a weak reference to a tensor over that storage, its version,
# digest). While the referenced tensor lives its storage cannot be freed and reused, so the key stays that tensor's
# bytes; the version counter catches an in-place write.
_digests: dict[tuple, tuple[weakref.ref, int, bytes]] = {}


def _identity(t: torch.Tensor) -> tuple:
    return (
        t.device,
        t.untyped_storage().data_ptr(),
        t.storage_offset(),
        tuple(t.shape),
        tuple(t.stride()),
        t.dtype,
    )


def tensor_digest(t: torch.Tensor) -> bytes:
    """SHA-256 of the bytes WEIGHTS and named data store for ``t`` (``blob.tensor_span``), once per tensor and
    process (while ``t`` lives)."""
    # Keyed by the tensor's own storage and version counter (a detached view shares both), never by a host copy's:
    # a temporary copy's address is reused by the next one.
    owner, t = t, t.detach()
    key = _identity(t)
    held = _digests.get(key)
    if held is not None:
        ref, version, digest = held
        alive = ref()
        if alive is not None and t._version == version:
            return digest
    span = blob_mod.tensor_span(t if t.device.type == "cpu" else t.cpu())
    digest = hashlib.sha256(memoryview(span) if span is not None else b"").digest()
    _digests[key] = (weakref.ref(owner, lambda _, k=key: _digests.pop(k, None)), t._version, digest)
    return digest


def key_of(digest: bytes) -> str:
    return KEY_PREFIX + digest.hex()


def tensor_data(t: torch.Tensor) -> tuple[str, TensorData]:
    """(key, the data ExecuTorch writes) for a weight: its bytes viewed in place."""
    digest = tensor_digest(t)
    return key_of(digest), TensorData(blob_mod.tensor_span(t.detach().cpu()), digest)


def engine_key(engine: HeldData) -> str:
    return key_of(engine.sha256())


class StoredData(FileBackedData):
    """A :class:`HeldData` as ExecuTorch's ``FileBackedData`` (what ``NamedDataStore`` and ``Cord`` take besides
    ``bytes``): read only when ExecuTorch writes the file, never copied (deep copies are the object itself)."""

    def __init__(self, held: HeldData):  # FileBackedData's takes a whole file of its own
        self._held = held
        self._size, self._sha256, self._finalizer = len(held), None, None

    def __deepcopy__(self, memo):
        return self

    def __copy__(self):
        return self

    def prefix(self, size: int) -> bytes:
        return self._held.prefix(size)

    def sha256(self) -> bytes:
        return self._held.sha256()

    def to_bytes(self) -> bytes:
        return self._held.to_bytes()

    def write_to_file(self, outfile) -> None:
        self._held.write_to_file(outfile)

    def close(self) -> None:
        self._held.close()


def data_store(entries: list[tuple[str, HeldData | bytes]], mode: str):
    """The ``NamedDataStoreOutput`` of one partition: ``entries`` under their keys, in the .pte (``pte``) or the
    .ptd (``ptd``)."""
    from executorch.exir._serialize._named_data_store import NamedDataStore

    store = NamedDataStore()
    tag = EXTERNAL_TAG if mode == "ptd" else None
    for key, data in entries:
        data = StoredData(data) if isinstance(data, HeldData) else data  # bytes: a small datum of our own
        store.add_named_data(key, data, alignment=ALIGNMENT, external_tag=tag)
    return store.get_named_data_store_output()
