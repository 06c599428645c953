"""States several methods of one program declare: one buffer per name, checked at lowering.

ExecuTorch exports an LLM as several methods of one program (``prefill`` and ``decode``, ``encoder`` and
``decoder``) that update the same buffers (the KV cache). The delegate owns those buffers (docs/stateful-decode.md),
so each method's delegate would otherwise hold its own and ``decode`` would never see what ``prefill`` wrote.
``preprocess_multimethod`` (backend/preprocess.py) sees every method's partitions at once: :func:`shared_states`
finds each buffer name declared by more than one method, checks that they declare it alike (dtype, shape, initial
contents) and records the methods in each blob's STATE entry; at init every delegate of one loaded program binds
the one tensor held under that name (runtime/state.py ``acquire``).

The runtime tells which loaded program a delegate belongs to by the program's named data
(extension/runtime/program_scope.h), so a program with shared states always carries some: :func:`program_marker`,
one small datum (the shared names and their methods) that ExecuTorch stores once whichever partition adds it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
from torch.export import ExportedProgram

from et_tensorrt.builder.named_data import KEY_PREFIX
from et_tensorrt.errors import StateSharingError
from et_tensorrt.format.state_table import initial_bytes


@dataclass(frozen=True)
class Declared:
    """One method's declaration of a mutated buffer its partition owns."""

    method: str
    dtype: torch.dtype
    shape: tuple[int, ...]
    initial: bytes  # SHA-256 of the initial contents (b"" for zeros)

    def spec(self) -> str:
        zeros = "zeros" if not self.initial else f"contents {self.initial.hex()[:12]}"
        return f"{str(self.dtype).replace('torch.', '')}{self.shape} ({zeros})"


def owned_buffers(program: ExportedProgram, method: str) -> dict[str, Declared]:
    """The buffers ``program`` (one partition) updates, by name: what ExecuTorch moved into the delegate."""
    mutated = set(program.graph_signature.buffers_to_mutate.values())
    found = {}
    for name in sorted(mutated):
        t = program.state_dict.get(name)
        if t is None:
            t = program.constants.get(name)  # a non-persistent buffer
        if t is None:
            continue
        contents = initial_bytes(t)
        initial = b"" if contents is None else hashlib.sha256(contents).digest()
        found[name] = Declared(method, t.dtype, tuple(t.shape), initial)
    return found


def shared_states(programs: Mapping[str, Sequence[ExportedProgram]]) -> dict[str, tuple[str, ...]]:
    """Buffer name -> the methods (sorted) whose partitions own it, for every name more than one method owns.
    StateSharingError when those methods declare it differently: they could not share one buffer."""
    declared: dict[str, list[Declared]] = {}
    for method, partitions in programs.items():
        for program in partitions:
            for name, d in owned_buffers(program, method).items():
                declared.setdefault(name, []).append(d)
    shared = {}
    for name, ds in sorted(declared.items()):
        methods = sorted({d.method for d in ds})
        if len(methods) < 2:
            continue
        ds = sorted(ds, key=lambda d: d.method)  # the error names them in one order, whatever the dict's
        first = ds[0]
        for d in ds[1:]:
            if (d.dtype, d.shape, d.initial) != (first.dtype, first.shape, first.initial):
                raise StateSharingError(
                    f"the buffer {name!r} is updated by the methods {first.method!r} as {first.spec()} and "
                    f"{d.method!r} as {d.spec()}: methods of one program share a buffer by its name, so they must "
                    "declare it alike; export both methods from one model (the same cache sizes and dtype), or give "
                    "the buffers different names"
                )
        shared[name] = tuple(methods)
    return shared


def program_marker(shared: Mapping[str, Sequence[str]]) -> tuple[str, bytes]:
    """(key, bytes) of the named datum that makes a program with shared states carry named data: the shared names
    and their methods, keyed by its digest (the same datum from every partition: stored once)."""
    data = json.dumps({"shared_states": {k: list(v) for k, v in sorted(shared.items())}}, sort_keys=True).encode()
    return KEY_PREFIX + "states:" + hashlib.sha256(data).hexdigest(), data
