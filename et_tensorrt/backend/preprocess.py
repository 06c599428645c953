"""``EtTensorRTBackend``: ExecuTorch's AOT hook that turns one partition into a delegate blob.

``preprocess`` runs a ``PartitionJob`` (backend/stages/job.py) through ``STAGES``, one file each under
backend/stages/ (its docstring tables what each reads and writes):

options (compile specs) -> to_aten (edge partition -> aten ExportedProgram, on the host) -> legalize_quant
(Q/DQ TensorRT runs, activation quantization it cannot express dropped) -> lift_state (mutable
buffers become engine state, backend/state_lifting.py) -> metadata -> cache_lookup (builder/build_cache.py,
keyed by the partition itself; a hit skips the next four) -> to_onnx (in memory, weights outside the
protobuf) -> validate (float64 refusal, [onnxruntime]) -> recipe (the device-build RECIPE over WEIGHTS,
backend/recipe_derivation.py) -> build (TensorRT engine, streamed into the cache) -> embed (the aten program:
GRAPH: torch.export's JSON, WEIGHTS: raw tensors; nothing pickled, see et_tensorrt.embedded_program; the weights
mode, REFIT_MAP; named data) -> serialize (the blob, docs/blob-format.md).

When TensorRT refuses the partition and ``pass_through_build_failures`` is off, the blob carries no ENGINE
section and the runtime runs the embedded program with PyTorch (ExecuTorch cannot un-delegate after
preprocess); a warning names the op (stages/build.py, ``fall_back``).
"""

from __future__ import annotations

import copy

import torch
from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult
from executorch.exir.backend.compile_spec_schema import CompileSpec
from torch.export import ExportedProgram

from et_tensorrt import compile_specs as cs
from et_tensorrt import progress
from et_tensorrt.backend import debug_handles, engine_sharing
from et_tensorrt.backend.stages import STAGES
from et_tensorrt.backend.stages.job import PartitionExport, PartitionJob, record_exports, stats
from et_tensorrt.backend.stages.serialize import state_table
from et_tensorrt.backend.state_sharing import program_marker, shared_states

__all__ = [
    "PARTITION_COUNT",
    "PARTITION_INDEX",
    "STAGES",
    "UNBOUNDED_MAX_FACTOR",
    "EtTensorRTBackend",
    "PartitionExport",
    "PartitionJob",
    "record_exports",
    "state_table",
    "stats",
]

PARTITION_INDEX = cs.PARTITION_INDEX
PARTITION_COUNT = cs.PARTITION_COUNT
UNBOUNDED_MAX_FACTOR = cs.UNBOUNDED_MAX_FACTOR


class EtTensorRTBackend(BackendDetails):
    @classmethod
    def copy_exported_program_for_preprocess(cls, edge_program: ExportedProgram, compile_specs: list[CompileSpec]):
        """ExecuTorch deep-copies each partition before ``preprocess`` (in case a backend changes it): a copy of
        every weight, the model's size again, before any of our work. The stages never write a weight (to_aten
        makes new programs, casts make new tensors), so the copy shares them: graph, signature and metadata are
        copied, the parameters and constants are the program's own. A buffer the program mutates is copied:
        validation runs the program, which writes it."""
        mutated = set(edge_program.graph_signature.buffers_to_mutate.values())
        tensors = [t for name, t in edge_program.state_dict.items() if name not in mutated]
        shared = {id(t): t for t in (*tensors, *edge_program.constants.values())}
        return copy.deepcopy(edge_program, shared)

    @staticmethod
    def preprocess(edge_program: ExportedProgram, compile_specs: list[CompileSpec]) -> PreprocessResult:
        return _run(PartitionJob(edge_program, compile_specs))

    @classmethod
    def preprocess_multimethod(
        cls, edge_programs: dict[str, list[ExportedProgram]], compile_specs: dict[str, list[list[CompileSpec]]]
    ) -> dict[str, list[PreprocessResult]]:
        """Every method's partitions at once (ExecuTorch calls this for a program of one or more methods): a buffer
        several methods update is one state of the loaded program, bound by each of their delegates
        (backend/state_sharing.py); declared differently, the lowering stops here with StateSharingError."""
        shared = shared_states(edge_programs)
        marker = program_marker(shared) if shared else None
        results = {method: [None] * len(programs) for method, programs in edge_programs.items()}
        built: list[PartitionJob] = []  # partitions whose engines a later method's partition may run
        # Methods with dynamic shapes first (a prefill): their engines hold the fixed shapes of the others.
        for method in sorted(edge_programs, key=lambda m: not any(map(_dynamic, edge_programs[m]))):
            for i, (program, specs) in enumerate(zip(edge_programs[method], compile_specs[method])):
                mine = set(program.graph_signature.buffers_to_mutate.values())
                job = PartitionJob(program, specs, method=method, methods=len(edge_programs))
                job.shared_states = {name: methods for name, methods in shared.items() if name in mine}
                job.program_marker = marker if job.shared_states else None
                results[method][i] = _run(job, built)
                built.append(job)
        for method_results in results.values():  # ExecuTorch logs init outside the delegates' instructions
            debug_handles.share_init_entries([r.debug_handle_map for r in method_results])
        return results


def _dynamic(program: ExportedProgram) -> bool:
    return any(
        isinstance(d, torch.SymInt)
        for n in program.graph.nodes
        if n.op == "placeholder" and isinstance(n.meta.get("val"), torch.Tensor)
        for d in n.meta["val"].shape
    )


def _run(job: PartitionJob, built: list[PartitionJob] = ()) -> PreprocessResult:
    """One partition through the stages; ``built``: other methods' partitions, whose engine it runs where it
    computes the same (backend/engine_sharing.py): it then builds none of its own."""
    shares = False  # runs another method's engine: builds none of its own
    for stage in STAGES:
        if job.from_cache and not stage.on_cache_hit:
            continue  # served from the build cache: no ONNX export, validation or build
        if shares and stage.name in engine_sharing.SKIPPED:
            continue
        with progress.step(lambda: job.label or "partition", stage.name):  # et_tensorrt.progress
            stage.run(job)
        if stage.name == "metadata" and built and job.build.share_engines:
            shares = engine_sharing.take_engine(job, built)
    return PreprocessResult(
        processed_bytes=job.blob,
        data_store_output=job.data_store,
        debug_handle_map=debug_handles.debug_handle_map(  # the delegate's events -> the partition's nodes
            job.edge_program, _spec_int(job.options, cs.PARTITION_INDEX), _spec_int(job.options, cs.PARTITION_COUNT)
        ),
    )


def _spec_int(options: dict[str, str], key: str) -> int:
    """A decoded compile spec's decimal value; 0 when absent or not a number (as the runtime reads it)."""
    value = options.get(key, "")
    return int(value) if value.isdigit() else 0
