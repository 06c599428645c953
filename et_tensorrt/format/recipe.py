"""The RECIPE section (docs/blob-format.md): what a TensorRT builder on the device needs to build the partition
for the GPU it lands on, without storing the weights again.

Three parts: a JSON **header** (the engine's inputs with their optimization profiles, its outputs, the state
aliases, the precision and build options, and which engine the blob carries ahead of time: flavour, version,
targets), the partition's **ONNX graph** with every initializer's bytes left out, and the **map**: per
initializer, a recipe that rebuilds its exact bytes from the blob's WEIGHTS, in REFIT_MAP's encoding
(et_tensorrt.format.refit_map: one encoding, one derivation, one verification, one ``rebuild``). :func:`encode`
writes the payload (lowering: backend/recipe_derivation.py); the C++ reader parses and checks it;
:func:`initializers` rebuilds the tensors, for the device build (et_tensorrt.runtime.device_build; the builder's
view of a recipe and the header of an ONNX export are the builder layer's: builder/recipe_build.py).
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from et_tensorrt.errors import BlobFormatError
from et_tensorrt.format import refit_map

if TYPE_CHECKING:
    import torch

VERSION = 1  # the layout below; the C++ reader parses only this one (kRecipeVersion)
_HEAD = struct.Struct("<IIIIQQ")  # version, reserved, header_len, reserved, graph_len, map_len
ALIGNMENT = 64


def _pad(n: int) -> int:
    return (-n) % ALIGNMENT


def encode(header: dict, graph: bytes, map_payload: bytes) -> bytes:
    """The RECIPE payload: head, header JSON at 32, graph and map each at the next 64-aligned offset."""
    text = json.dumps(header, sort_keys=True).encode("utf-8")
    if not graph:
        raise BlobFormatError("RECIPE: an empty graph")
    head = _HEAD.pack(VERSION, 0, len(text), 0, len(graph), len(map_payload))
    out = bytearray(head + text)
    out += bytes(_pad(len(out)))
    out += graph
    out += bytes(_pad(len(out)))
    return bytes(out + map_payload)


@dataclass
class Recipe:
    """A parsed RECIPE (``version`` other than :data:`VERSION`: present, but from a newer writer: unusable)."""

    version: int
    header: dict = field(default_factory=dict)
    graph: bytes | memoryview = b""
    map: bytes | memoryview = b""
    entries: list = field(default_factory=list)  # et_tensorrt.format.refit_map.Entry, as the C++ reader parsed them
    header_bytes: bytes = b""  # the header as stored (the engine cache keys on it)
    error: str = ""  # why a recipe of this version is unusable anyway (a header that is not a JSON object)

    @property
    def usable(self) -> bool:
        return self.version == VERSION and not self.error

    @property
    def unusable_reason(self) -> str:
        if self.version != VERSION:
            return f"its build recipe has layout version {self.version}, newer than this et_tensorrt reads"
        return self.error

    @property
    def nbytes(self) -> int:
        """The recipe's size: its header as stored, graph and map."""
        return len(self.header_bytes) + len(self.graph) + len(self.map)

    @property
    def raw_bytes(self) -> int:
        """The weight bytes the map stores itself (its RAW steps), rather than rebuilding them from WEIGHTS."""
        return sum(s.nbytes for e in self.entries for s in e.steps if s.op == refit_map.RAW)

    @property
    def aot_engine(self) -> dict | None:
        """The ahead-of-time engine the blob carries: flavour, version, targets, gpu (None: it has none)."""
        return self.header.get("engine")

    @staticmethod
    def from_parsed(parsed: dict | None, copy: bool = True) -> Recipe | None:
        """The reader's ``recipe`` (None: the blob has none). Never raises: a header that is not a JSON
        object makes the recipe unusable (``error``), not the blob, which still runs without it."""
        if parsed is None:
            return None
        version = int(parsed["version"])
        if version != VERSION:
            return Recipe(version)

        def payload(key):
            return bytes(parsed[key]) if copy else parsed[key]

        raw = bytes(parsed["header"])
        try:
            header = json.loads(raw.decode("utf-8"))
        except ValueError as exc:
            header = f"not JSON ({exc})"
        if not isinstance(header, dict):
            error = header if isinstance(header, str) else "not a JSON object"
            return Recipe(version, header_bytes=raw, error=f"its build recipe's header is {error}")
        return Recipe(version, header, payload("graph"), payload("map"), refit_map.from_parsed(parsed["entries"]), raw)


def initializers(recipe: Recipe, weights: list[torch.Tensor]) -> dict[str, torch.Tensor]:
    """Every initializer of the recipe's graph, rebuilt from ``weights`` (the WEIGHTS entries in table order):
    contiguous host tensors whose bytes are the ones the ahead-of-time engine was built from."""
    return {e.name: refit_map.rebuild(e, weights, recipe.map) for e in recipe.entries}


def engine_header(flavour, targets, gpu: str | None) -> dict:
    """The header's ``engine``: what an engine built by ``flavour`` (et_tensorrt.trt.Flavour) runs on, its named
    targets, or with none (full TensorRT) the GPU it was built on."""
    targets = list(targets)
    return {"flavour": flavour.name, "version": flavour.version, "targets": targets, "gpu": None if targets else gpu}
