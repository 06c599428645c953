"""The lowering every command shares: :func:`et_tensorrt.lower` with the command line's options, printing
the partition report, the backend's per-engine progress and placement warnings, and refusing (exit 4) a
lowering that delegated nothing."""

from __future__ import annotations

import contextlib
import os
import time
import warnings
from dataclasses import dataclass, field

from ..compile_specs import BuildOptions
from ..errors import PlacementWarning, UnmatchedOpWarning
from .common import NothingDelegated, UsageError, backend_log


@dataclass(frozen=True)
class LoweringRequest:
    target_device: object  # parser.DeviceArg, or anything whose str() is a device (cuda:0)
    min_block_size: int
    torch_executed_ops: tuple[str, ...] = ()
    build: BuildOptions = field(default_factory=BuildOptions)
    zero_copy_inputs: bool = True
    allow_no_delegate: bool = False
    cuda_graph: bool | tuple[str, ...] = False  # every method, or the methods named (lower's cuda_graph)
    constant_methods: dict | None = None  # added to the program (cli/constant_methods.py decides them)

    @classmethod
    def from_args(cls, args) -> LoweringRequest:
        named_data = getattr(args, "named_data", None) or BuildOptions().named_data  # auto: the backend decides
        return cls(
            target_device=args.target_device,
            min_block_size=args.min_block_size,
            torch_executed_ops=tuple(args.torch_executed_op),
            build=BuildOptions(
                precision=args.precision,
                target_archs=tuple(args.target_arch),
                cache=args.cache,
                weights=args.weights,
                named_data=named_data,
                device_build=args.device_build,
                strict_quantization=args.strict_quantization,
            ),
            zero_copy_inputs=args.zero_copy_inputs,
            allow_no_delegate=args.allow_no_delegate,
            cuda_graph=_cuda_graph(getattr(args, "cuda_graph", None)),
        )

    def describe(self) -> str:
        archs = f", targets {','.join(self.build.target_archs)}" if self.build.target_archs else ""
        if self.cuda_graph:
            graphed = "every method" if self.cuda_graph is True else ", ".join(self.cuda_graph)
            archs += f", CUDA graph for {graphed}"
        return (
            f"lowering for {self.target_device} (precision {self.build.precision}{archs}, "
            f"weights {self.build.weights}, named data {self.build.named_data}, min_block_size {self.min_block_size}, "
            f"torch_executed_ops {list(self.torch_executed_ops)})"
        )


def _cuda_graph(given: list | None) -> bool | tuple[str, ...]:
    """``--cuda-graph`` (every method) or ``--cuda-graph METHOD ...``; absent: False."""
    if not given:
        return False
    return True if True in given else tuple(given)


@dataclass
class Lowered:
    data: bytes | None  # the program (None when it was written to `saved` instead)
    report: object  # et_tensorrt.PartitionReport
    exports: dict  # et_tensorrt.format.blob.program_digest -> backend.preprocess.PartitionExport
    saved: object = None  # et_tensorrt.lowering.SavedProgram, when written to a file


def lower_program(
    program,
    request: LoweringRequest,
    debug: bool,
    *,
    source: str,
    record: bool = False,
    output: str | None = None,
    etrecord: str | None = None,
) -> Lowered:
    """Lower ``program`` (an ExportedProgram; ``source`` names it in build-cache entries); prints as it goes,
    each partition's stages too (a progress bar on a terminal, lines otherwise). ``record``: keep each partition's
    ONNX export for ``check`` (a build-cache hit then still exports it). ``output``: write the program there (and
    its .ptd beside it) piece by piece instead of returning its bytes. ``etrecord``: write the lowering's ETRecord
    there too. Raises UsageError for a
    ``--torch-executed-op`` that matches no node, NothingDelegated when nothing was delegated."""
    from .. import lower, lowering
    from ..backend import preprocess
    from ..builder import build_cache
    from ..progress import Progress, reporting, step

    before = dict(preprocess.stats)
    print(request.describe() + " ...", flush=True)
    start = time.perf_counter()
    with (
        backend_log(debug),
        build_cache.describing(source),
        preprocess.record_exports() if record else contextlib.nullcontext({}) as exports,
        warnings.catch_warnings(record=True) as caught,
    ):
        warnings.simplefilter("always")
        warnings.simplefilter("error", UnmatchedOpWarning)  # stops the lowering at partitioning, before any build
        if request.build.named_data == "ptd" and output is None:
            raise UsageError("--named-data ptd writes a .ptd beside the .pte: give -o/--output (or use pte)")
        data = saved = None
        try:
            with reporting(Progress(show="auto" if not debug else "log")) as progress:
                manager = lowering.lower_program(
                    program,
                    zero_copy_inputs=request.zero_copy_inputs,
                    build_options=request.build,
                    target_device=str(request.target_device),
                    min_block_size=request.min_block_size,
                    torch_executed_ops=request.torch_executed_ops,
                    progress=progress,
                    cuda_graph=request.cuda_graph if isinstance(request.cuda_graph, bool) else list(request.cuda_graph),
                    constant_methods=request.constant_methods,
                    etrecord=etrecord,
                )
                if output is None:
                    data = manager.buffer
                elif request.allow_no_delegate or any(r.partitions for r in lower.last_reports.values()):
                    with step("program", "write"):
                        saved = lowering.write_program(manager, output)
                del manager
        except UnmatchedOpWarning as e:
            raise UsageError("--torch-executed-op: " + str(e).removeprefix("et_tensorrt: ")) from e
    seconds = time.perf_counter() - start
    report = lower.last_report
    made = {k: preprocess.stats[k] - before.get(k, 0) for k in preprocess.stats}
    print()
    if isinstance(program, dict):  # several methods: a report each
        for name, method_report in lower.last_reports.items():
            print(f"method {name}:\n{method_report}")
        delegated = any(r.partitions for r in lower.last_reports.values())
    else:
        print(report)
        delegated = bool(report.partitions)
    for w in caught:
        if issubclass(w.category, PlacementWarning):
            print(f"warning: {w.message}")
        elif debug:
            print(f"debug: {w.category.__name__}: {w.message}")
    print(
        f"\nlowered in {seconds:.1f} s: {made['partitions']} delegate(s); engines {made['built']} built, "
        f"{made['cache_hits']} from cache, {made['fallbacks']} left to PyTorch"
    )
    if not delegated and not request.allow_no_delegate:
        raise NothingDelegated(
            f"nothing was delegated: all {len(report.nodes)} node(s) stay on the host (the report above says "
            "why); --allow-no-delegate accepts such a program"
        )
    if saved is not None:
        print(f"wrote {saved.path} ({saved.pte_bytes:,} bytes)")
        if saved.data_path:
            print(f"wrote {saved.data_path} ({saved.ptd_bytes:,} bytes: the program's named data; run it with --data)")
    if etrecord is not None:
        print(f"wrote {etrecord} ({os.path.getsize(etrecord):,} bytes: the ETRecord, for Inspector)")
    return Lowered(data, report, dict(exports), saved)


def write_program(path: str, data: bytes) -> None:
    from ..atomic_file import write_bytes

    write_bytes(path, data)
    print(f"wrote {path} ({len(data):,} bytes)")
