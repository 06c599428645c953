"""The safe loader: a blob's embedded program -> ``torch.export.ExportedProgram``, with no code from the file.

Version 2: GRAPH (torch.export JSON) + WEIGHTS (raw tensors the C++ reader already bounds-checked).
Version 1: the same JSON and raw tensors, read out of the ``torch.export.save`` archive (archive_v1).
Either way the JSON is checked (graph_check) before torch's deserializer sees it, torch gets the weights
as ready tensors (never bytes it would unpickle), no sample inputs, and any failure is one
:class:`ProgramRefusedError` naming what was refused.
"""

from __future__ import annotations

import json
import threading
import warnings
import zlib
from collections.abc import Mapping

import numpy as np
import torch

from et_tensorrt.errors import ProgramRefusedError
from et_tensorrt.format.blob import Blob, WeightEntry, tensor_span
from et_tensorrt.format.dtypes import scalar_type_dtype

from .graph_check import check_program

# torch's deserializer keeps a process-wide "current deserializer" and is not thread-safe.
_LOAD_LOCK = threading.Lock()

# Which graph-signature kinds a stored tensor may back: a version-1 archive files non-persistent buffers
# under constants.
_BACKS = {
    "parameter": {"parameter", "weights"},
    "buffer": {"buffer", "weights", "constants"},
    "tensor_constant": {"constant", "constants"},
}


def _refuse(what: str) -> None:
    raise ProgramRefusedError(f"embedded program: {what}")


def checked_program(graph: bytes):
    """The GRAPH JSON as torch's schema dataclasses, checked (see graph_check); refused otherwise."""
    from torch._export.serde import schema as S
    from torch._export.serde.serialize import _dict_to_dataclass

    try:
        doc = json.loads(bytes(graph).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        _refuse(f"GRAPH is not UTF-8 JSON ({e})")
    if not isinstance(doc, dict):
        _refuse("GRAPH is not a JSON object")
    try:
        program = _dict_to_dataclass(S.ExportedProgram, doc)
    except Exception as e:  # noqa: BLE001 - any shape torch's schema does not accept
        _refuse(f"GRAPH does not follow torch.export's schema ({type(e).__name__}: {str(e)[:200]})")
    try:
        check_program(program)
    except ProgramRefusedError:
        raise
    except Exception as e:  # noqa: BLE001 - a field of the wrong type deep inside
        _refuse(f"GRAPH has a malformed field ({type(e).__name__}: {str(e)[:200]})")
    return program


def weight_tensor(blob: Blob, entry: WeightEntry) -> torch.Tensor:
    """A WEIGHTS entry as a tensor of its own (copied out of the blob; the reader checked the bounds)."""
    raw = torch.frombuffer(bytearray(blob.weight_bytes(entry)), dtype=torch.uint8) if entry.nbytes else None
    return _as_declared(raw, entry)


def _as_declared(raw: torch.Tensor | None, entry: WeightEntry) -> torch.Tensor:
    """A WEIGHTS entry's bytes (uint8; None or empty for an empty tensor) as the tensor the entry declares."""
    dtype = scalar_type_dtype(entry.dtype)
    if entry.nbytes == 0:
        return torch.empty_strided(entry.sizes, entry.strides, dtype=dtype)
    return raw.view(dtype).as_strided(entry.sizes, entry.strides)


def weight_tensors(blob: Blob, named: Mapping[str, bytes] | None = None) -> list[torch.Tensor]:
    """Every WEIGHTS entry, in table order: in the delegate, views of ExecuTorch's buffer (no copy, see
    Blob.weight_views); from ``read_blob``, copies out of ``blob.data``, or for an entry that is named data, out of
    ``named`` (key -> bytes: inspection.named_data of the program)."""
    if blob.weight_views is not None:
        return list(blob.weight_views)
    out = []
    for index, entry in enumerate(blob.weights):
        ref = blob.named_weight(index)
        if ref is None:
            out.append(weight_tensor(blob, entry))
            continue
        data = (named or {}).get(ref.key)
        if data is None or len(data) != entry.nbytes:
            _refuse(f"weight {entry.name!r} is named data {ref.key!r}, which the program's data given here lacks")
        _check_named(entry, ref, data)
        out.append(_as_declared(torch.frombuffer(bytearray(data), dtype=torch.uint8), entry))
    return out


def weight_views(blob: Blob, named: Mapping[str, object]) -> list[torch.Tensor]:
    """Every WEIGHTS entry without a copy, in table order, for code that only reads them (the REFIT_MAP's and
    RECIPE's verification, ``prepare``'s build): a read-only view of ``blob.data`` at the offset the C++ reader
    checked (``read_blob(data, copy=False)``), or for an entry that is named data, ``named[key]``: the program's own
    tensor (the lowering that wrote it) or a buffer of its bytes (inspection.named_data)."""
    if blob.weight_views is not None:
        return list(blob.weight_views)
    out = []
    for index, entry in enumerate(blob.weights):
        ref = blob.named_weight(index)
        source = named.get(ref.key) if ref is not None else blob.data
        if isinstance(source, torch.Tensor):
            out.append(_as_entry(source, entry))
            continue
        if entry.nbytes == 0:
            out.append(_as_declared(None, entry))
            continue
        if source is None or (ref is not None and memoryview(source).nbytes != entry.nbytes):
            _refuse(f"weight {entry.name!r} is named data {ref.key!r}, which the program's data given here lacks")
        if ref is not None:
            _check_named(entry, ref, source)
        raw = np.frombuffer(source, dtype=np.uint8, count=entry.nbytes, offset=0 if ref is not None else entry.offset)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # read-only memory: these views are never written
            out.append(_as_declared(torch.from_numpy(raw), entry))
    return out


def _as_entry(tensor: torch.Tensor, entry: WeightEntry) -> torch.Tensor:
    """``tensor`` seen as ``entry`` declares it. Named data is keyed by its bytes, so weights with the same bytes (a
    constant-filled (128, 64) and (64, 128)) share one key and the tensor handed in may be the other's."""
    declared = (scalar_type_dtype(entry.dtype), tuple(entry.sizes), tuple(entry.strides))
    if (tensor.dtype, tuple(tensor.shape), tensor.stride()) == declared:
        return tensor
    # the bytes named data holds: the storage span, in memory order
    return _as_declared(torch.from_numpy(tensor_span(tensor)), entry)


def _check_named(entry: WeightEntry, ref, data) -> None:
    """A named weight's bytes read outside the delegate (``check``'s reference, ``prepare``'s build) against the
    CRC-32 its NAMED_DATA entry records, as the delegate checks them at init (docs/blob-format.md)."""
    if ref.crc32 is None:
        return  # NAMED_DATA layout 0: nothing recorded
    actual = zlib.crc32(data)
    if actual != ref.crc32:
        _refuse(
            f"weight {entry.name!r} is named data {ref.key!r}, which fails its digest (crc32 0x{actual:08x}, "
            f"recorded 0x{ref.crc32:08x}): the .ptd (or the .pte) holding it is corrupt; copy it again or save the "
            "model again"
        )


def _check_values(name: str, t: torch.Tensor) -> None:
    if t.dtype == torch.bool and t.numel() and bool((t.view(torch.uint8) > 1).any()):
        _refuse(f"bool weight {name!r} holds bytes other than 0 and 1")


def _meta_matches(program, arg_name: str, name: str, t: torch.Tensor) -> None:
    """The stored tensor has the dtype and (static) sizes the graph declares for its placeholder."""
    from torch._export.serde.serialize import _SERIALIZE_TO_TORCH_DTYPE

    meta = program.graph_module.graph.tensor_values.get(arg_name)
    if meta is None:
        _refuse(f"weight {name!r}: the graph declares no tensor {arg_name!r} for it")
    if _SERIALIZE_TO_TORCH_DTYPE[meta.dtype] != t.dtype:
        _refuse(f"weight {name!r} is {t.dtype}, the graph declares {_SERIALIZE_TO_TORCH_DTYPE[meta.dtype]}")
    sizes = [s.value if s.type == "as_int" else None for s in meta.sizes]
    if len(sizes) != t.dim() or any(s is not None and s != n for s, n in zip(sizes, t.shape)):
        _refuse(f"weight {name!r} has shape {tuple(t.shape)}, the graph declares {sizes}")


def bind_weights(program, tensors: dict[str, tuple[str, torch.Tensor, bool]], *, strict: bool):
    """(state_dict, constants) for torch's deserializer, from the stored tensors the signature names.

    ``tensors``: target -> (stored kind, tensor, persistent). With ``strict`` (version 2) an entry the
    program does not use is refused as unknown; a version-1 archive may carry more than it needs.
    """
    state_dict, constants, used = {}, {}, set()
    for spec in program.graph_module.signature.input_specs:
        kind = spec.type
        if kind == "user_input":
            continue
        value = spec.value
        target = {
            "parameter": getattr(value, "parameter_name", None),
            "buffer": getattr(value, "buffer_name", None),
            "tensor_constant": getattr(value, "tensor_constant_name", None),
        }[kind]
        if target not in tensors:
            _refuse(f"{kind} {target!r} has no stored tensor")
        stored, tensor, persistent = tensors[target]
        if stored not in _BACKS[kind]:
            _refuse(f"{kind} {target!r} is stored as a {stored}")
        _check_values(target, tensor)
        _meta_matches(program, value.arg.name, target, tensor)
        used.add(target)
        if kind == "parameter":
            state_dict[target] = torch.nn.Parameter(tensor, requires_grad=False)
        elif kind == "buffer" and value.persistent:
            state_dict[target] = tensor
        else:
            constants[target] = tensor
    unknown = sorted(set(tensors) - used)
    if strict and unknown:
        _refuse(f"WEIGHTS entry {unknown[0]!r} is not an input of the program (unknown entry); refused")
    return state_dict, constants


def _deserialize(program, state_dict: dict, constants: dict) -> torch.export.ExportedProgram:
    from torch._export.serde.serialize import ExportedProgramDeserializer

    try:
        with _LOAD_LOCK:
            return ExportedProgramDeserializer().deserialize(program, state_dict, constants, None)
    except Exception as e:  # noqa: BLE001 - a checked but inconsistent program (names, shapes, schema)
        _refuse(f"the GRAPH does not deserialize ({type(e).__name__}: {str(e)[:300]})")


def load_program(blob: Blob, named: Mapping[str, bytes] | None = None) -> torch.export.ExportedProgram:
    """The blob's embedded program (GRAPH + WEIGHTS, or a version-1 PROGRAM archive), loaded safely (``named``:
    the program's named data, for weights that live there)."""
    if blob.graph is not None:
        program = checked_program(blob.graph)
        weights = weight_tensors(blob, named)
        tensors = {w.name: (w.kind, t, w.persistent) for w, t in zip(blob.weights, weights, strict=True)}
        return _deserialize(program, *bind_weights(program, tensors, strict=True))
    if blob.program is not None:
        from .archive_v1 import read_archive  # local: version-1 blobs only

        try:
            graph, stored = read_archive(bytes(blob.program))
        except ProgramRefusedError:
            raise
        except Exception as e:  # noqa: BLE001 - a malformed archive field of the wrong type
            _refuse(f"the version-1 archive is malformed ({type(e).__name__}: {str(e)[:200]})")
        program = checked_program(graph)
        tensors = {name: (folder, t, True) for name, (folder, t) in stored.items()}
        return _deserialize(program, *bind_weights(program, tensors, strict=False))
    _refuse("the blob carries no program (an engine-only blob runs only where its engine does)")
