"""Read the program of a version-1 blob (a ``torch.export.save`` zip archive) without unpickling anything.

Only three kinds of entry are ever read: the model JSON (``models/model.json``), the two payload
configs, and the raw weight/constant files they name. A config entry that is pickled (``use_pickle``), a
custom (torchbind) or opaque object, or a legacy pickled weights file is refused by name. Sample inputs
are never read: et_tensorrt wrote none (``data/sample_inputs/model.pt`` is empty in every version-1
blob it made), so a non-empty one is a pickle chosen by the file and is refused by name, judged by its
size in the zip directory alone. Entries torch.export.save does not write are refused as unknown.
Entries must be stored uncompressed (torch writes them so), which bounds what reading one can cost by the
blob's own size.
"""

from __future__ import annotations

import io
import json
import re
import zipfile

import torch
from torch._export.serde import schema as S
from torch._export.serde.serialize import _SERIALIZE_TO_TORCH_DTYPE

from et_tensorrt.errors import ProgramRefusedError

MODEL = "models/model.json"
SAMPLE_INPUTS = "data/sample_inputs/model.pt"
# What torch.export.save writes besides the model, configs and raw files (never read).
_BOOKKEEPING = {"archive_format", "archive_version", ".data/version", ".data/serialization_id", "byteorder"}
CONFIGS = {
    "weights": "data/weights/model_weights_config.json",
    "constants": "data/constants/model_constants_config.json",
}
PICKLED_LEGACY = ("data/weights/model.pt", "data/constants/model.pt")
_FILE = {"weights": re.compile(r"weight_[0-9]{1,9}\Z"), "constants": re.compile(r"tensor_[0-9]{1,9}\Z")}
MAX_ENTRIES = 1 << 16
MAX_RANK = 64
_DTYPES = {int(k): v for k, v in _SERIALIZE_TO_TORCH_DTYPE.items()}


def refuse(where: str, what: str) -> None:
    raise ProgramRefusedError(f"embedded program (version-1 archive): {where}: {what}")


class Archive:
    """The archive's entries by path below its root folder; reads stored entries only."""

    def __init__(self, data: bytes):
        try:
            self._zip = zipfile.ZipFile(io.BytesIO(data))
            infos = self._zip.infolist()
        except (zipfile.BadZipFile, ValueError, OSError, EOFError) as e:
            refuse("archive", f"is not a readable zip archive ({e})")
        if len(infos) > MAX_ENTRIES:
            refuse("archive", f"has {len(infos)} entries (more than {MAX_ENTRIES})")
        roots = {info.filename.split("/", 1)[0] for info in infos}
        if len(roots) != 1 or not all("/" in info.filename for info in infos):
            refuse("archive", "does not have the single root folder torch.export.save writes")
        self._size = len(data)
        self.entries = {info.filename.split("/", 1)[1]: info for info in infos}

    def read(self, name: str) -> bytes:
        info = self.entries.get(name)
        if info is None:
            refuse(name, "is missing")
        if info.compress_type != zipfile.ZIP_STORED or info.file_size > self._size:
            refuse(name, "is compressed or larger than the archive (torch stores entries uncompressed)")
        try:
            return self._zip.read(info)
        except (zipfile.BadZipFile, ValueError, OSError, EOFError, RuntimeError) as e:
            refuse(name, f"cannot be read ({e})")


def _as_int(v, where: str, lo: int = 0) -> int:
    if (
        not isinstance(v, dict)
        or set(v) != {"as_int"}
        or not isinstance(v["as_int"], int)
        or isinstance(v["as_int"], bool)
        or not lo <= v["as_int"] < 2**63
    ):
        refuse(where, f"{str(v)[:80]} is not a static size (symbolic sizes are refused here)")
    return v["as_int"]


def _tensor(archive: Archive, folder: str, path_name: str, meta, files: dict, where: str) -> torch.Tensor:
    if not isinstance(meta, dict):
        refuse(where, "has no tensor metadata")
    dtype = _DTYPES.get(meta.get("dtype"))
    if dtype is None or meta.get("layout") != int(S.Layout.Strided):
        refuse(where, f"dtype {meta.get('dtype')!r} / layout {meta.get('layout')!r} is not a plain strided tensor")
    sizes, strides = meta.get("sizes"), meta.get("strides")
    if (
        not isinstance(sizes, list)
        or not isinstance(strides, list)
        or len(sizes) != len(strides)
        or len(sizes) > MAX_RANK
    ):
        refuse(where, "sizes and strides do not describe a tensor")
    sizes = [_as_int(s, where) for s in sizes]
    strides = [_as_int(s, where) for s in strides]
    offset = _as_int(meta.get("storage_offset"), where)
    key = (folder, path_name)
    if key not in files:
        raw = archive.read(f"data/{folder}/{path_name}")
        if len(raw) % dtype.itemsize:
            refuse(where, f"{len(raw)} bytes is not a whole number of {dtype} elements")
        files[key] = (
            torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(dtype) if raw else torch.empty(0, dtype=dtype)
        )
    storage = files[key]
    if any(s == 0 for s in sizes):
        return torch.empty_strided(sizes, strides, dtype=dtype)
    span = offset + 1 + sum((n - 1) * st for n, st in zip(sizes, strides))
    if span > storage.numel():
        refuse(where, f"addresses {span} elements of a {storage.numel()}-element file")
    return torch.as_strided(storage, sizes, strides, offset)


def read_archive(data: bytes) -> tuple[bytes, dict[str, tuple[str, torch.Tensor]]]:
    """(model JSON, {target: (kind, tensor)}) of a torch.export.save archive; kind is "weights" or "constants"."""
    archive = Archive(data)
    models = [n for n in archive.entries if n.startswith("models/") and n.endswith(".json")]
    if models != [MODEL]:
        refuse("models/", f"holds {models}, not exactly {MODEL}")
    for legacy in PICKLED_LEGACY:
        if legacy in archive.entries:
            refuse(legacy, "is a pickled weights file (legacy format); refused")
    sample = archive.entries.get(SAMPLE_INPUTS)
    if sample is not None and sample.file_size != 0:
        refuse(
            SAMPLE_INPUTS,
            f"holds {sample.file_size} bytes of pickled sample inputs (et_tensorrt never stores "
            "any); refused without reading it",
        )
    for name in archive.entries:
        known = (
            name in _BOOKKEEPING
            or name in (MODEL, SAMPLE_INPUTS)
            or name in CONFIGS.values()
            or any(
                name.startswith(f"data/{folder}/") and _FILE[folder].match(name.rsplit("/", 1)[1]) for folder in _FILE
            )
        )
        if not known:
            leaf = name.rsplit("/", 1)[-1]
            if leaf.startswith("custom_obj_"):
                refuse(name, "is a custom (torchbind) object, pickled; refused")
            if leaf.startswith("opaque_obj_"):
                refuse(name, "is an opaque object, pickled; refused")
            refuse(name, "is not an entry torch.export.save writes for a program (unknown entry); refused")
    tensors: dict[str, tuple[str, torch.Tensor]] = {}
    files: dict = {}
    for folder, config_name in CONFIGS.items():
        if config_name not in archive.entries:
            continue
        try:
            config = json.loads(archive.read(config_name).decode("utf-8"))["config"]
        except (ValueError, KeyError, TypeError) as e:
            refuse(config_name, f"is not a payload config ({e})")
        if not isinstance(config, dict):
            refuse(config_name, "is not a payload config")
        for target, entry in config.items():
            where = f"{folder} entry {str(target)[:120]!r}"
            if not isinstance(entry, dict) or not isinstance(target, str):
                refuse(where, "is not a payload entry")
            path_name = entry.get("path_name")
            if entry.get("use_pickle") is not False:
                refuse(where, f"is pickled (use_pickle: {entry.get('use_pickle')!r}); refused")
            if isinstance(path_name, str) and path_name.startswith("custom_obj_"):
                refuse(where, "is a custom (torchbind) object; refused")
            if isinstance(path_name, str) and path_name.startswith("opaque_obj_"):
                refuse(where, "is an opaque (pickled) object; refused")
            if not isinstance(path_name, str) or not _FILE[folder].match(path_name):
                refuse(where, f"names file {str(path_name)[:80]!r}, not a raw {folder} file")
            tensors[target] = (folder, _tensor(archive, folder, path_name, entry.get("tensor_meta"), files, where))
    return archive.read(MODEL), tensors
