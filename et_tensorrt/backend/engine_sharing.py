"""One engine for the methods of a program that compute the same thing at different shapes.

An LLM exported as ``prefill`` (a prompt of 1..S tokens, a dynamic length) and ``decode`` (one token) is one
network twice: same weights, same caches, same arguments; only ``decode``'s shapes are fixed. Two engines would
store the network's code and weights twice (most of a TensorRT engine's bytes), so ``preprocess_multimethod``
builds ``prefill``'s engine only and lets ``decode``'s delegate run it too, when :func:`take_engine` finds that:

* the two partitions have the same build options, the same states (name, dtype, shape) and the same arguments and
  results (kind, dtype, rank; arguments matched one to one, as two exports may order them differently), and the
  engine's profile ranges hold every shape and size value of ``decode``'s; ``decode``'s blob carries the engine's
  RECIPE (and a weight-stripped engine's REFIT_MAP) only when ``prefill``'s weights are its first, by content and in
  order, as both index the blob's WEIGHTS;
* their programs agree when run: PyTorch runs both on the same random arguments of ``decode``'s shapes, from the
  same random states, for several consecutive calls with the states carried over, and every result and new state
  is equal within the engine precision's tolerance. (Structure alone cannot prove it: the two exports trace
  different Python paths.)

The engine's bytes are then named data under one key (stored once; without named data each blob still carries a
copy), each method's blob keeps its own I/O table (``decode``'s static shapes, bound by the engine's names), its
own embedded program and its own write-position guard; at run time each delegate has its own execution context
over the program's shared states (runtime/state.py). The blob's METADATA says ``engine_shared_with``.
"""

from __future__ import annotations

import logging

import torch

from et_tensorrt import compile_specs as cs
from et_tensorrt.backend.stages.build import _io_entries
from et_tensorrt.backend.stages.cache_lookup import _checked, _program
from et_tensorrt.backend.stages.job import PartitionJob
from et_tensorrt.backend.stages.to_onnx import record_devices
from et_tensorrt.backend.state_validation import _place_positions
from et_tensorrt.backend.validation import validation_inputs
from et_tensorrt.builder.named_data import tensor_digest
from et_tensorrt.builder.onnx_export import OnnxExport, partition_io
from et_tensorrt.builder.profiles import decode_dynamic_dims
from et_tensorrt.format import blob as blob_mod
from et_tensorrt.parity import compare, for_precision

logger = logging.getLogger("et_tensorrt")

STEPS = 3  # consecutive calls compared, the states carried over
SKIPPED = frozenset({"cache_lookup", "to_onnx", "validate", "recipe", "build"})  # a sharing job's own engine work


def _arguments(job: PartitionJob) -> OnnxExport:
    """The partition's arguments and results as the engine would take them (its own shapes; no export)."""
    job.dynamic_dims = decode_dynamic_dims(job.options.get(cs.DYNAMIC_DIMS, ""))
    inputs, outputs, _, _ = partition_io(job.engine_ep, job.build.unbounded_max_factor, job.dynamic_dims)
    arguments = OnnxExport(b"", 0, inputs, outputs, state_count=len(job.states))
    record_devices(arguments, job.recorded)
    return arguments


def _within(info, entry: blob_mod.IOEntry) -> bool:
    """Whether every shape (a size: every value) ``info`` declares runs in the ranges of the engine's I/O ``entry``."""
    if info.is_size != entry.is_size or blob_mod.scalar_type_code(info.dtype) != entry.dtype:
        return False
    dims = (info.value,) if info.is_size else info.dims
    if len(dims) != len(entry.dims):
        return False
    return all(e.min <= d.min and (e.max < 0 or d.max <= e.max) for d, e in zip(dims, entry.dims))


def _engine_io(donor: PartitionJob) -> tuple[list, list]:
    """The engine's arguments and results as its blob's I/O table says (a cache hit has no export to read)."""
    inputs = [e for e in donor.io_entries if e.role != blob_mod.ROLE_OUTPUT]
    return inputs, [e for e in donor.io_entries if e.role == blob_mod.ROLE_OUTPUT]


def _weights(job: PartitionJob) -> list[bytes]:
    return [tensor_digest(w.tensor) for w in job.program[1]] if job.program is not None else []


def _indexes_alike(job: PartitionJob, donor: PartitionJob) -> bool:
    """Whether ``donor``'s weights are the first of ``job``'s, by content and in order: then the engine's RECIPE and
    REFIT_MAP, which name weights by their index in the blob's WEIGHTS, read the same tensors in ``job``'s blob. (The
    other export may lift a few more constants after them.)"""
    theirs, mine = _weights(donor), _weights(job)
    return mine[: len(theirs)] == theirs


def _matching(arguments: OnnxExport, engine_inputs: list) -> list[int] | None:
    """For each of ``job``'s arguments the engine argument it is (two exports may order a partition's arguments
    differently: the engine binds them by name), when exactly one fits each; else None."""
    mine = arguments.delegate_inputs
    fits = [[j for j, bound in enumerate(engine_inputs) if _within(info, bound)] for info in mine]
    if len(mine) != len(engine_inputs) or any(len(f) == 0 for f in fits):
        return None
    chosen: list[int | None] = [f[0] if len(f) == 1 else None for f in fits]
    taken = {c for c in chosen if c is not None}
    for i, f in enumerate(fits):  # an argument that fits several takes the one no other argument has taken
        if chosen[i] is None:
            free = [j for j in f if j not in taken]
            if len(free) != 1:
                return None
            chosen[i] = free[0]
            taken.add(free[0])
    return chosen if len(taken) == len(chosen) else None


def _mismatch(job: PartitionJob, donor: PartitionJob, arguments: OnnxExport) -> str:
    """Why ``job`` cannot run on ``donor``'s engine by what both declare, or ""."""
    if donor.engine is None:
        return "it has no engine"
    # cuda_graph is how each delegate calls the engine (decode graphed, prefill not), not what the engine is
    options, donor_options = job.build.replace(cuda_graph=False), donor.build.replace(cuda_graph=False)
    if (options, job.settings, job.device) != (donor_options, donor.settings, donor.device):
        return "other build options or device"
    mine = [(s.buffer, s.dtype, s.shape) for s in job.states]
    if mine != [(s.buffer, s.dtype, s.shape) for s in donor.states]:
        return "other states"
    if any(d.in_place and s.guard is None for s, d in zip(job.states, donor.states)):
        return "a state its engine updates in place has no write-position guard here"
    engine_inputs, engine_outputs = _engine_io(donor)
    if len(arguments.delegate_inputs) != len(engine_inputs) or len(arguments.delegate_outputs) != len(engine_outputs):
        return "other arguments or results"
    matching = _matching(arguments, engine_inputs)
    if matching is None:
        return "its arguments do not fit the engine's, one to one"
    if any(bool(info.name) != bool(engine_inputs[j].name) for info, j in zip(arguments.delegate_inputs, matching)):
        return "a size the engine derives is an argument here, or the other way round"
    for info, bound in zip(arguments.delegate_outputs, engine_outputs):
        if blob_mod.scalar_type_code(info.dtype) != bound.dtype or len(info.dims) != len(bound.dims):
            return "other results"
    if job.program is None:
        return "its program cannot be embedded"
    if job.build.weights == "refit" and not _indexes_alike(job, donor):
        return "other weights (a weight-stripped engine is refitted from this blob's weights, by index)"
    return ""


def _disagreement(job: PartitionJob, donor: PartitionJob, arguments: OnnxExport) -> str:
    """Runs both programs on ``job``'s shapes, from random states, STEPS calls; "" when they agree."""
    mine, theirs = job.engine_ep.module(), donor.engine_ep.module()
    n = len(job.states)
    matching = _matching(arguments, _engine_io(donor)[0])
    state = None
    start = 0
    for step in range(STEPS):
        drawn = list(validation_inputs(job.engine_ep, arguments, seed=step))
        inputs, random_state = drawn[: len(drawn) - n], drawn[len(drawn) - n :]
        state = random_state if state is None else state  # random contents: every read of the state counts
        start = _place_positions(inputs, job.states, start)
        try:
            with torch.no_grad():
                expected = list(mine(*inputs, *[t.clone() for t in state]))
                ordered = [None] * len(inputs)  # the donor's argument order
                for value, j in zip(inputs, matching):
                    ordered[j] = value
                got = list(theirs(*ordered, *[t.clone() for t in state]))
        except Exception as exc:  # noqa: BLE001 - a program that cannot run here cannot be compared
            return f"PyTorch cannot run both at step {step + 1}: {exc}"
        result = compare(expected, got, for_precision(job.build.precision))
        if not result.passed:
            return f"their results differ at step {step + 1}: {result.failures()}"
        state = expected[len(expected) - n :]
    return ""


def take_engine(job: PartitionJob, built: list[PartitionJob]) -> bool:
    """Whether ``job`` runs the engine of another method's partition in ``built`` (the module doc), which it then
    takes (:func:`_share`); the reason for each one refused is logged."""
    candidates = [d for d in built if d.method != job.method and d.engine is not None]
    if not candidates or job.engine_ep is None:
        return False
    job.program, job.program_error = _program(job.aten_ep)
    arguments = _arguments(job)
    for donor in candidates:
        why = _mismatch(job, donor, arguments) or _disagreement(job, donor, arguments)
        if not why:
            _share(job, donor, arguments)
            return True
        logger.info("%s (%s): not sharing %s's engine (%s): %s", job.label, job.method, donor.method, donor.label, why)
    return False


def _share(job: PartitionJob, donor: PartitionJob, arguments: OnnxExport) -> None:
    """``job`` takes ``donor``'s engine (in place of stages cache_lookup .. build): its I/O table is its own shapes
    under the engine's binding names, its states bound to the engine's, its embedded program its own."""
    job.program_error = _checked(job.program, job.program_error)
    engine_inputs, engine_outputs = _engine_io(donor)
    for info, j in zip(arguments.delegate_inputs, _matching(arguments, engine_inputs)):
        info.name = engine_inputs[j].name  # the engine's binding name (a size the engine derives stays "")
    for info, bound in zip(arguments.delegate_outputs, engine_outputs):
        info.name = bound.name
    job.io_entries = _io_entries(arguments)
    for state, theirs in zip(job.states, donor.states):
        state.input_name, state.output_name, state.in_place = theirs.input_name, theirs.output_name, theirs.in_place
    job.engine, job.export = donor.engine, donor.export
    if _indexes_alike(job, donor):  # the RECIPE reads the same weights by the same indices here
        job.recipe, job.recipe_map = donor.recipe, donor.recipe_map
    else:
        job.metadata["device_build_dropped"] = f"its weights are not {donor.method}'s, in order, for the recipe"
    job.validation = donor.validation
    own = job.metadata
    job.metadata = {**donor.metadata, **own, "engine_shared_with": f"{donor.method} ({donor.label})"}
    job.metadata.pop("engine_cache_key", None)
    job.key = None
    logger.info("%s (%s): runs the engine of %s (%s)", job.label, job.method, donor.method, donor.label)
