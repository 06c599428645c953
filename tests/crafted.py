"""Crafted ``.pte`` files: one per route by which a file could run code while et_tensorrt loads it.

Each route starts from a ``.pte`` lowered by et_tensorrt and rewrites its delegate blob the way an
attacker would. The payloads try to create a *canary* file; a route is closed when the canary never
appears and loading refuses the file naming the entry. The version-1 routes rewrite the blob's
``torch.export.save`` archive (what every blob held before format version 2):

* ``sample_inputs``   ``data/sample_inputs/model.pt`` is a pickle whose ``__reduce__`` opens the canary
                      (issue 20's reproduction: torch falls back to ``weights_only=False``);
* ``use_pickle``      a weight's config entry says ``use_pickle: true`` and names such a pickle;
* ``custom_object``   a constant is a custom (torchbind) object (``torch._C._pickle_load_obj``);
* ``opaque_object``   a constant is an opaque object (``pickle.loads``);
* ``expression_v1``   a tensor size in ``models/model.json`` is an expression ``sympy.sympify`` evals.

Version 2 has no archive and no pickle; its routes are the JSON fields torch evaluates or imports:

* ``expression``      the same expression in GRAPH;
* ``treespec_enum``   a module-call treespec whose context names a module torch imports;
* ``target``          a node whose target is a torch callable that writes files (``torch.save``);
* ``name``            a node name that is Python source (names are pasted into generated code);
* ``guards_code``     ``guards_code`` (Python source for the guard function).

The helpers only pack bytes (struct, zipfile), so they also run against older et_tensorrt trees.
"""

from __future__ import annotations

import io
import json
import pickle
import struct
import zipfile
import zlib
from collections.abc import Callable

import torch

V1_ROUTES = ("sample_inputs", "use_pickle", "custom_object", "opaque_object", "expression_v1")
V2_ROUTES = ("expression", "treespec_enum", "target", "name", "guards_code")

# Where each route's refusal message points (a fragment of it).
REFUSAL = {
    "sample_inputs": "data/sample_inputs/model.pt",
    "use_pickle": "use_pickle",
    "custom_object": "custom (torchbind) object",
    "opaque_object": "opaque object",
    "expression_v1": "expression",
    "expression": "expression",
    "treespec_enum": "treespec",
    "target": "torch.save",
    "name": "is not an identifier",
    "guards_code": "guards_code",
}


class Canary:
    """Unpickling it opens ``path`` for writing: code from the file ran."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def canary_pickle(path: str) -> bytes:
    buf = io.BytesIO()
    torch.save(Canary(path), buf)
    return buf.getvalue()


def expression_bait(path: str) -> str:
    return f"open({path!r}, 'w')"


# -------------------------------------------------------------------------------------- blob bytes


def blob_sections(blob: bytes) -> tuple[int, int, int, list[tuple[int, bytes]]]:
    """(version, exec device type, exec device index, [(kind, payload)]) read straight from the bytes."""
    _magic, version, _flags, _hs, count, _total, dev_type, dev_index, _ = struct.unpack_from("<4sHHIIQbb6s", blob, 0)
    sections = []
    for i in range(count):
        kind, _, offset, size = struct.unpack_from("<IIQQ", blob, 32 + 24 * i)
        sections.append((kind, blob[offset : offset + size]))
    return version, dev_type, dev_index, sections


def pack_blob(sections: list[tuple[int, bytes]], version: int, dev_type: int, dev_index: int) -> bytes:
    """A blob of these sections, each payload at a 64-byte aligned offset. From version 3 with a fresh DIGESTS
    section (kind 9) of them: a hostile file carries digests that match, so only the loader's checks stop it."""
    sections = [(k, p) for k, p in sections if k != 9]
    if version >= 3:
        digests = [struct.pack("<II", k, zlib.crc32(p)) for k, p in sections]
        sections.append((9, struct.pack("<II", len(digests), 0) + b"".join(digests)))
    offset = 32 + 24 * len(sections)
    table, body = b"", b""
    for kind, payload in sections:
        offset += (-offset) % 64
        body += b"\0" * (offset - 32 - 24 * len(sections) - len(body)) + payload
        table += struct.pack("<IIQQ", kind, 0, offset, len(payload))
        offset += len(payload)
    header = struct.pack("<4sHHIIQbb6s", b"ETRT", version, 0, 32, len(sections), offset, dev_type, dev_index, b"\0" * 6)
    return header + table + body


def replace_blob(pte: bytes, blob: bytes) -> bytes:
    """The program with its (first) delegate's payload replaced, serialized by ExecuTorch."""
    from executorch.exir._serialize._program import deserialize_pte_binary, serialize_pte_binary

    pte_file = deserialize_pte_binary(pte)
    pte_file.program.backend_delegate_data[0].data = blob
    return bytes(serialize_pte_binary(pte_file, extract_delegate_segments=True))


def first_blob(pte: bytes) -> bytes:
    from executorch.exir._serialize._program import deserialize_pte_binary

    return bytes(deserialize_pte_binary(pte).program.backend_delegate_data[0].data)


# ------------------------------------------------------------------------------ version-1 archives


def partition_archive(blob: bytes) -> bytes:
    """The partition's torch.export.save archive: the blob's own (version 1), or saved from its program."""
    version, _, _, sections = blob_sections(blob)
    if version == 1:
        return dict(sections)[3]
    from et_tensorrt.embedded_program import load_program
    from et_tensorrt.format.blob import read_blob

    buf = io.BytesIO()
    torch.export.save(load_program(read_blob(blob)), buf)
    return buf.getvalue()


def rewrite_archive(archive: bytes, edit: Callable[[dict[str, bytes]], None]) -> bytes:
    """The archive with ``edit`` applied to its {path below the root: bytes} entries (stored, like torch)."""
    zf = zipfile.ZipFile(io.BytesIO(archive))
    root = zf.namelist()[0].split("/", 1)[0]
    entries = {name.split("/", 1)[1]: zf.read(name) for name in zf.namelist()}
    edit(entries)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as zo:
        for name, data in entries.items():
            zo.writestr(f"{root}/{name}", data)
    return out.getvalue()


def v1_blob(blob: bytes, archive: bytes) -> bytes:
    """A version-1 blob: the blob's IO_TABLE (and ENGINE, METADATA) with PROGRAM = ``archive``."""
    _, dev_type, dev_index, sections = blob_sections(blob)
    keep = [(k, p) for k, p in sections if k in (1, 2, 4)]
    return pack_blob(keep[:1] + [(3, archive)] + keep[1:], 1, dev_type, dev_index)


def _edit_config(entries: dict, config: str, edit: Callable[[dict], None]) -> None:
    doc = json.loads(entries[config])
    edit(doc["config"])
    entries[config] = json.dumps(doc).encode()


def v1_route(route: str, canary: str) -> Callable[[dict[str, bytes]], None]:
    weights, constants = "data/weights/model_weights_config.json", "data/constants/model_constants_config.json"

    def edit(entries: dict[str, bytes]) -> None:
        if route == "sample_inputs":
            entries["data/sample_inputs/model.pt"] = canary_pickle(canary)
        elif route == "use_pickle":

            def pickled(config):
                first = next(iter(config.values()))
                first.update(use_pickle=True, path_name="weight_90")

            _edit_config(entries, weights, pickled)
            entries["data/weights/weight_90"] = canary_pickle(canary)
        elif route in ("custom_object", "opaque_object"):
            prefix = "custom_obj_0" if route == "custom_object" else "opaque_obj_0"
            _edit_config(
                entries,
                constants,
                lambda c: c.update(
                    {"obj": {"path_name": prefix, "is_param": False, "use_pickle": True, "tensor_meta": None}}
                ),
            )
            entries[f"data/constants/{prefix}"] = pickle.dumps(Canary(canary))
        elif route == "expression_v1":
            entries["models/model.json"] = json.dumps(
                with_expression(json.loads(entries["models/model.json"]), expression_bait(canary))
            ).encode()
        else:
            raise ValueError(route)

    return edit


# ----------------------------------------------------------------------------------- torch.export JSON


def _user_input(doc: dict) -> str:
    for spec in doc["graph_module"]["signature"]["input_specs"]:
        if "user_input" in spec:
            return spec["user_input"]["arg"]["as_tensor"]["name"]
    raise ValueError("no user input")


def with_expression(doc: dict, expr: str) -> dict:
    """The user input's first size replaced by ``expr`` (torch parses it when it builds that placeholder)."""
    meta = doc["graph_module"]["graph"]["tensor_values"][_user_input(doc)]
    meta["sizes"][0] = {"as_expr": {"expr_str": expr, "hint": {"as_int": 2}}}
    return doc


def v2_route(route: str, canary: str) -> Callable[[dict], None]:
    def edit(doc: dict) -> None:
        graph = doc["graph_module"]["graph"]
        if route == "expression":
            with_expression(doc, expression_bait(canary))
        elif route == "treespec_enum":
            # pytree's enum hook imports the module named in "fqn" and walks the attribute path ("this": a
            # harmless module with a visible import side effect; any installed module would be imported).
            ctx = json.dumps([{"__enum__": True, "fqn": "this:Enum", "name": "x"}])
            spec = [
                1,
                {
                    "type": "builtins.dict",
                    "context": ctx,
                    "children_spec": [{"type": None, "context": None, "children_spec": []}],
                },
            ]
            doc["graph_module"]["module_call_graph"][0]["signature"]["in_spec"] = json.dumps(spec)
        elif route == "target":
            node = graph["nodes"][0]
            node["target"] = "torch.save"  # torch resolves any torch.* callable and calls it when the graph runs
        elif route == "name":
            node = graph["nodes"][0]
            old = node["outputs"][0]["as_tensor"]["name"]
            bad = f"x = open({canary!r}, 'w')\n    {old}"
            node["outputs"][0]["as_tensor"]["name"] = bad
        elif route == "guards_code":
            doc["guards_code"] = [f"open({canary!r}, 'w')"]
        else:
            raise ValueError(route)

    return edit


def v2_blob(blob: bytes, edit: Callable[[dict], None]) -> bytes:
    version, dev_type, dev_index, sections = blob_sections(blob)
    assert version >= 2, "version-2 routes start from a version-2 (or 3) blob"
    out = []
    for kind, payload in sections:
        if kind == 5:
            doc = json.loads(payload)
            edit(doc)
            payload = json.dumps(doc).encode()
        out.append((kind, payload))
    return pack_blob(out, version, dev_type, dev_index)


def crafted_pte(pte: bytes, route: str, canary: str) -> bytes:
    """``pte`` with its delegate blob rewritten for ``route`` (see the module docstring)."""
    blob = first_blob(pte)
    if route in V1_ROUTES:
        return replace_blob(pte, v1_blob(blob, rewrite_archive(partition_archive(blob), v1_route(route, canary))))
    return replace_blob(pte, v2_blob(blob, v2_route(route, canary)))
