"""Engines for the GPU a program lands on: when the blob's ahead-of-time engine cannot run here, build one from
its RECIPE with the TensorRT builder installed here, keep it in the engine cache, and load it.

The blob's engine is made ahead of time, usually by TensorRT-RTX on a CPU machine, for named compute
capabilities (TensorRT-RTX 1.7.1: SM75 to SM121, without SM87 Jetson Orin, SM90 H100/H200 or SM100 B200), and
runs only with the TensorRT flavour and version that built it. :func:`aot_fit` predicts from the RECIPE's header
whether it runs on this GPU with the TensorRT here; where it does not (or it does not deserialize), and a builder
that can build for this GPU is importable (``tensorrt`` or ``tensorrt_rtx``, et_tensorrt.trt), :func:`engine_for`
builds the engine from the recipe (the weightless ONNX graph, each initializer rebuilt from WEIGHTS) through the
one engine builder (et_tensorrt.builder.engine_builder), or takes it from the engine cache.

The engine cache is the build cache's folder and file layout (et_tensorrt.builder.build_cache:
``ET_TENSORRT_CACHE_DIR``, checksummed entries written atomically, least recently used evicted). The builder
streams the engine straight into its entry, and an engine from the cache is a region of the entry's file
(``held_data.FileRegion``), mapped for TensorRT to deserialize: a device-built engine is never a second copy in
memory. An entry is keyed by the partition (its RECIPE and program digest), the GPU (name and compute
capability), the builder's flavour and version and the build's options; before use it is checked against its
key, checksum and the partition digest it records, and a bad entry is removed and built again, never trusted.

The recipe's initializers are rebuilt from the blob's WEIGHTS entries wherever their bytes are: in the blob, or
ExecuTorch named data (a program lowered with ``named_data``): in the delegate both are views of ExecuTorch's
buffers (``Blob.weight_views``); ``et-tensorrt prepare`` reads a program's named data from its .pte or .ptd.

Whether a load may build: ``Runner(..., prepare=...)`` or ``ET_TENSORRT_PREPARE``: ``auto`` (default: use the
cache, else build, with one log line naming the time), ``cache`` (use a prepared engine only, never build at
load: ``et-tensorrt prepare`` fills the cache), ``off`` (only the blob's own engine).
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass

from .. import __version__, trt
from ..builder import build_cache
from ..builder.held_data import FileRegion
from ..embedded_program.loader import weight_views
from ..errors import BlobFormatError, EngineBuildError
from ..format import blob as blob_mod
from ..format.blob import program_digest
from ..format.recipe import encode, engine_header

log = logging.getLogger("et_tensorrt")

PREPARE_ENV = "ET_TENSORRT_PREPARE"
POLICIES = ("auto", "cache", "off")
FORMAT = 1  # of the key and of what an entry records; bump to make every device-built entry miss

_policy: contextvars.ContextVar[str | None] = contextvars.ContextVar("et_tensorrt_prepare", default=None)


def check_policy(value) -> str:
    """``auto`` / ``cache`` / ``off`` (True means auto, False cache); ValueError naming the value otherwise."""
    if value is True:
        return "auto"
    if value is False:
        return "cache"
    text = str(value).strip().lower() if isinstance(value, str) else None
    if text not in POLICIES:
        raise ValueError(
            f"prepare={value!r} is not one of {', '.join(POLICIES)} (auto: build an engine for this GPU at load "
            "when needed; cache: use a prepared one only; off: only the blob's own engine)"
        )
    return text


def prepare_policy() -> str:
    """The policy in force: the active :func:`policy` block's (a Runner's ``prepare``), else ``ET_TENSORRT_PREPARE``
    (unset or empty: ``auto``)."""
    value = _policy.get()
    if value is not None:
        return value
    env = os.environ.get(PREPARE_ENV, "")
    return "auto" if not env.strip() else check_policy(env)


@contextlib.contextmanager
def policy(value) -> Iterator[None]:
    """Loads inside the block use ``value`` (None: the environment's)."""
    token = _policy.set(None if value is None else check_policy(value))
    try:
        yield
    finally:
        _policy.reset(token)


@dataclass(frozen=True)
class Gpu:
    name: str  # "NVIDIA H200"
    sm: str  # "sm90"


def this_gpu(device) -> Gpu:
    """The GPU at ``device`` (a cuda torch.device)."""
    import torch

    index = device.index or 0
    return Gpu(torch.cuda.get_device_name(index), trt.sm_name(torch.cuda.get_device_capability(index)))


@dataclass
class Made:
    """An engine for this GPU, ready to deserialize."""

    data: FileRegion  # the engine, held in its cache entry's file (or a private temp file when not cached)
    flavour: trt.Flavour
    origin: str  # for the plan: "built here for sm90 with TensorRT 11.4 in 14.2 s; cached", "from the engine cache ..."
    key: str
    from_cache: bool
    gpu: Gpu
    targets: tuple[str, ...]  # what it was built for (TensorRT-RTX's named targets; () TensorRT: the GPU)


# --------------------------------------------------------------------------------------- will the blob's engine run


def aot_fit(blob, gpu: Gpu | None) -> str:
    """Why the blob's own engine will not run on ``gpu`` with the TensorRT here, or ``""`` when it may (then it is
    deserialized, and only that says for sure). Without a RECIPE nothing is known beyond the engine itself."""
    if not blob.has_engine:
        return "the blob carries no ahead-of-time engine"
    recipe = blob.recipe
    info = recipe.aot_engine if recipe is not None and recipe.usable else None
    if not info or gpu is None:
        return ""
    built_by = str(info.get("flavour"))
    why = trt.engine_runs_on(
        built_by, str(info.get("version")), tuple(info.get("targets") or ()), gpu.sm, trt.get(built_by)
    )
    if not why and not info.get("targets") and info.get("gpu") and info["gpu"] != gpu.sm:
        why = f"its engine was built for a {info['gpu']} GPU, not this one ({gpu.sm})"
    return why


def aot_runtime(blob) -> trt.Flavour | None:
    """The flavour that deserializes the blob's own engine: the one that built it (the RECIPE's header says), else
    lowering's default (older blobs)."""
    recipe = blob.recipe
    info = recipe.aot_engine if recipe is not None and recipe.usable else None
    if info:
        return trt.get(str(info.get("flavour")))
    try:
        return trt.Flavour(trt.flavour(), trt.module())
    except Exception:  # noqa: BLE001 - no TensorRT builder: a runtime-only install
        return trt.get("tensorrt_rtx") or trt.get("tensorrt")


# ------------------------------------------------------------------------------------------------ the builder


def pick_builder(gpu: Gpu, prefer: str | None = None) -> tuple[trt.Flavour, tuple[str, ...]] | str:
    """The importable builder that can build for ``gpu`` (``prefer``, the ahead-of-time flavour, first) and the
    targets it names, or why none can."""
    found = trt.builders()
    for flavour in sorted(found, key=lambda f: f.name != prefer):
        targets = flavour.targets_for(gpu.sm)
        if targets is not None:
            return flavour, targets
    if not found:
        return (
            "no TensorRT builder is installed here (tensorrt or tensorrt_rtx) to build one for this GPU: "
            "`pip install tensorrt` (data-center GPUs), JetPack's TensorRT on Jetson, or `pip install tensorrt-rtx`"
        )
    known = "; ".join(f"{f.label} targets {', '.join(f.known_targets())}" for f in found)
    return (
        f"no TensorRT builder here can build for {gpu.sm} ({known}); install TensorRT (`pip install tensorrt`, "
        "or JetPack's on Jetson) to build for this GPU"
    )


def partition_digest(blob, program: str) -> str:
    """The partition's identity for the engine cache: its RECIPE payload and ``program``, the digest of the
    program's graph and weights (``blob.program_digest``)."""
    h = hashlib.sha256(b"et_tensorrt-recipe\0")
    recipe = blob.recipe
    for part in (recipe.header_bytes, recipe.graph, recipe.map):
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    h.update(program.encode())
    return h.hexdigest()


def cache_key(digest: str, gpu: Gpu, flavour: trt.Flavour, targets: tuple[str, ...]) -> str:
    facts = [FORMAT, digest, gpu.name, gpu.sm, flavour.name, flavour.version, list(targets), __version__]
    return hashlib.sha256(repr(facts).encode()).hexdigest()


def _build(blob, flavour: trt.Flavour, targets: tuple[str, ...], sink) -> tuple[FileRegion, float]:
    """The engine built from the blob's RECIPE, streamed into ``sink`` (build_cache.EngineWriter: its cache entry,
    or a private file where the cache cannot be written), and the seconds it took."""
    # Local: the builder (the ONNX export's modules, TensorRT's builder) loads only when an engine is built here.
    from ..builder.engine_builder import BuildSettings, build_engine
    from ..builder.recipe_build import build_export

    recipe = blob.recipe
    # its initializers (read-only views of the WEIGHTS, never copies, or tensors rebuilt from them) live until the
    # build returns
    export = build_export(recipe, weight_views(blob, {}))
    settings = BuildSettings(
        precision=str(recipe.header.get("precision", "fp32")),
        target_archs=targets,
        workspace_bytes=recipe.header.get("workspace_bytes"),
        flavour=flavour.name,
    )
    result = build_engine(export, settings, sink)
    return result.engine, result.seconds


def _facts(digest: str, gpu: Gpu, flavour: trt.Flavour) -> dict:
    """What a cache entry records of what it was built from, and is checked against before use."""
    return {"partition_digest": digest, "gpu": gpu.sm, "flavour": flavour.name, "version": flavour.version}


def _cached(key: str, digest: str, gpu: Gpu, flavour: trt.Flavour):
    """The checked cache entry for ``key``, or None (a bad entry is removed: it is built again)."""

    entry = build_cache.load(key)
    if entry is None:
        return None
    made = entry.metadata.get("device_build", {})
    expected = _facts(digest, gpu, flavour)
    wrong = [k for k, v in expected.items() if made.get(k) != v]
    if wrong:
        build_cache.discard(key, f"it records another {', '.join(wrong)} than its key says")
        return None
    return entry


def engine_for(blob, gpu: Gpu, why_not_aot: str, label: str | None = None) -> Made | str:
    """An engine for ``gpu`` built from the blob's RECIPE (or the engine cache's), or why there is none
    (``why_not_aot``: why the blob's own engine does not run here, which starts the message). ``label`` names the
    partition in log lines (default: its program digest's first digits)."""

    recipe = blob.recipe
    if recipe is None:
        return why_not_aot
    if not recipe.usable:
        return f"{why_not_aot}; {recipe.unusable_reason}"
    mode = prepare_policy()
    if mode == "off":
        return f"{why_not_aot}; building an engine for this GPU is off ({PREPARE_ENV}=off or prepare='off')"
    aot = recipe.aot_engine or {}
    picked = pick_builder(gpu, aot.get("flavour"))
    if isinstance(picked, str):
        return f"{why_not_aot}; {picked}"
    flavour, targets = picked
    program = program_digest(blob)  # every weight's bytes hashed: once per load
    if label is None:
        label = f"partition {program[:8]}"
    digest = partition_digest(blob, program)
    key = cache_key(digest, gpu, flavour, targets)
    entry = _cached(key, digest, gpu, flavour)
    if entry is not None:
        seconds = entry.build_seconds or 0.0
        origin = f"from the engine cache: built here for {gpu.sm} with {flavour.label} in {seconds:.1f} s"
        log.info("et_tensorrt: %sengine for %s %s", f"{label}: " if label else "", gpu.sm, origin)
        return Made(entry.engine, flavour, origin, key, True, gpu, targets)
    if mode == "cache":
        return (
            f"{why_not_aot}; no engine for this GPU ({gpu.sm}, {flavour.label}) in the engine cache "
            f"{build_cache.cache_dir()} and {PREPARE_ENV}=cache does not build at load: run `et-tensorrt prepare` "
            "on this machine"
        )

    entry = build_cache.Entry(
        key=key,
        engine=b"",
        io=list(blob.io),
        metadata={"device_build": {**_facts(digest, gpu, flavour), "gpu_name": gpu.name, "targets": list(targets)}},
        onnx_sha256=hashlib.sha256(recipe.graph).hexdigest(),
        info={"label": f"built here for {gpu.sm} ({gpu.name}) with {flavour.label}", "source": label or None},
    )
    sink = build_cache.engine_writer(entry)
    try:
        data, seconds = _build(blob, flavour, targets, sink)
    except (EngineBuildError, BlobFormatError) as e:
        return f"{why_not_aot}; building one here with {flavour.label} failed: {e}"
    origin = f"built here for {gpu.sm} with {flavour.label} in {seconds:.1f} s; " + (
        "cached" if sink.stored else "not cached (see the build cache's warning)"
    )
    log.warning(
        "et_tensorrt: %sengine %s (the blob's own does not run here: %s)",
        f"{label}: " if label else "",
        origin,
        why_not_aot,
    )
    return Made(data, flavour, origin, key, False, gpu, targets)


def prepared_blob(data: bytes, made: Made) -> bytes:
    """The blob ``data`` carrying ``made`` as its own engine (``et-tensorrt prepare -o``): the ENGINE replaced, the
    RECIPE's header naming it (so the choice sees it runs here), a REFIT_MAP dropped (this engine holds its
    weights), METADATA saying so. A blob whose engine was named data gets the new one in its ENGINE section (its
    NAMED_DATA then names only its weights, which stay where they are: the .pte's named data or its .ptd)."""
    import json

    blob = blob_mod.read_blob(data, copy=False)
    named = [n for n in blob.named if n.target != blob_mod.NAMED_ENGINE]
    header = dict(blob.recipe.header)
    header["engine"] = engine_header(made.flavour, made.targets, made.gpu.sm)
    metadata = dict(blob.metadata)
    metadata.update(
        trt_flavour=made.flavour.name,
        trt_version=made.flavour.version,
        target_archs=list(made.targets),
        prepared={"gpu": made.gpu.sm, "gpu_name": made.gpu.name, "origin": made.origin},
    )
    metadata.pop("refit_entries", None)
    return blob_mod.replace_sections(
        data,
        {
            blob_mod.SECTION_ENGINE: made.data.view(),  # copied once, from the mapped entry into the blob
            blob_mod.SECTION_NAMED_DATA: blob_mod.encode_named_data(named) if named else None,
            blob_mod.SECTION_REFIT_MAP: None,
            blob_mod.SECTION_RECIPE: encode(header, bytes(blob.recipe.graph), bytes(blob.recipe.map)),
            blob_mod.SECTION_METADATA: json.dumps(metadata, sort_keys=True).encode("utf-8"),
        },
    )
