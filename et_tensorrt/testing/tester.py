"""One fluent ``Tester`` for et_tensorrt, on ExecuTorch's backend test harness (like XNNPACK's ``test/tester``).

The harness drives a model through stages, each kept for inspection::

    export -> to_edge_transform_and_lower (TensorRTPartitioner) -> to_executorch -> serialize

and its ``run_method_and_compare_outputs`` runs the serialized program in ExecuTorch's pybindings against the
exported program. This subclass supplies our stages, built from the same pieces as :func:`et_tensorrt.lower`
(``lowering.make_partitioner`` / ``export`` / ``executorch_config``: one set of options, checked by
:class:`~et_tensorrt.compile_specs.BuildOptions`), and adds what our tests read::

    Tester(model, (x,)).lower(min_block_size=1).check_partitions(1).check_delegated_all() \\
        .run_both().check_parity()

* ``lower(**options)``: all four stages with :func:`et_tensorrt.lower`'s options (partitioner options,
  ``BuildOptions`` fields or ``build_options``, ``zero_copy_inputs``/``zero_copy_outputs``);
* checks on the partition report: ``check_partitions(n)``, ``check_delegated_all()``, ``check_host_nodes(names)``;
* ``run_runner`` (:class:`et_tensorrt.Runner`), ``run_executorch`` (``executorch.runtime``), ``run_both``;
* ``check_parity``: both entry points against eager PyTorch with a :class:`~et_tensorrt.parity.Tolerances`;
* quantized programs: ``check_quantization`` (what each engine's quantization became) and
  ``check_quantized_parity`` (within a share of the output's absmax of the quantized eager model).

The conformance flow (``et_tensorrt.conformance.flow``) makes the same Tester with the harness's edge config
and a strict export, as every backend-suite flow does.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from typing import Any

import executorch.backends.test.harness.stages as BaseStages
import torch
from executorch.backends.test.harness import Tester as TesterBase
from executorch.backends.test.harness.stages import StageType
from executorch.exir import EdgeCompileConfig
from executorch.exir.backend.partitioner import Partitioner

import et_tensorrt  # registers EtTensorRTBackend with ExecuTorch's runtime
from et_tensorrt import lowering
from et_tensorrt.inspection import delegate_blobs
from et_tensorrt.parity import EXACT, QUANTIZED_SHARE, SAME_MATH, Tolerances, compare, error_share
from et_tensorrt.partition import TensorRTPartitioner

from .blob_checks import check_blob, lowered_blobs

__all__ = ["Export", "Tester", "eager", "run_executorch"]

_ZERO_COPY = ("zero_copy_inputs", "zero_copy_outputs")


def run_executorch(pte: bytes, inputs: Sequence[torch.Tensor], method: str = "forward") -> list[torch.Tensor]:
    """ExecuTorch's own Python runtime, unchanged: Runtime.get().load_program(pte).load_method(...)."""
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(pte)
    return list(program.load_method(method).execute(list(inputs)))


def eager(model: torch.nn.Module, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    with torch.no_grad():
        out = model(*inputs)
    return list(out) if isinstance(out, (tuple, list)) else [out]


class Export(BaseStages.Export):
    """``torch.export`` as :func:`et_tensorrt.lower` does it (non-strict unless asked), of a deep copy of the
    module (export may leave a module in a state eager runs should not see); an ExportedProgram is taken as is."""

    def __init__(self, dynamic_shapes=None, *, strict: bool = False, program=None):
        super().__init__(dynamic_shapes=dynamic_shapes)
        self.strict = strict
        self.program = program

    def run(self, artifact, inputs) -> None:
        if self.program is not None:
            self.exported_program = self.program
            return
        self.exported_program = lowering.export(
            copy.deepcopy(artifact), inputs, self.dynamic_shapes, strict=self.strict
        )


class Tester(TesterBase):
    """ExecuTorch harness ``Tester`` whose lowering stages delegate to ``EtTensorRTBackend``.

    ``options`` are :func:`et_tensorrt.lower`'s (checked now; ``lower(**options)`` may add more);
    ``edge_compile_config``: None for ``lower``'s (IR validity checked); ``strict_export``: the harness's
    strict export (conformance) instead of ``lower``'s.
    """

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        module: torch.nn.Module | torch.export.ExportedProgram,
        example_inputs: Sequence[Any] = (),
        dynamic_shapes: Any | None = None,
        *,
        edge_compile_config: EdgeCompileConfig | None = None,
        strict_export: bool = False,
        **options: Any,
    ):
        self.program = module if isinstance(module, torch.export.ExportedProgram) else None
        if self.program is not None:
            module = self.program.module()
            example_inputs = example_inputs or tuple(a for a in self.program.example_inputs[0])
        self.edge_compile_config = edge_compile_config or EdgeCompileConfig()
        self.strict_export = strict_export
        self.options: dict[str, Any] = {}
        self.set_options(**options)
        stage_classes = TesterBase.default_stage_classes() | {
            StageType.EXPORT: self._export_stage,
            StageType.TO_EDGE: self._to_edge_stage,
            StageType.PARTITION: self._partition_stage,
            StageType.TO_EDGE_TRANSFORM_AND_LOWER: self._to_edge_transform_and_lower_stage,
            StageType.TO_EXECUTORCH: self._to_executorch_stage,
        }
        super().__init__(
            module=module,
            stage_classes=stage_classes,
            example_inputs=tuple(example_inputs),
            dynamic_shapes=dynamic_shapes,
        )
        self.lower_seconds = 0.0
        self._runner: et_tensorrt.Runner | None = None
        self.runner_outputs: list[torch.Tensor] = []
        self.executorch_outputs: list[torch.Tensor] = []
        self.last_inputs: tuple = ()

    # -- options and stages ------------------------------------------------------------------------

    def set_options(self, **options: Any) -> Tester:
        """Add lowering options (checked now: an unknown name is a TypeError, a bad value an OptionError)."""
        merged = {**self.options, **options}
        lowering.make_partitioner(
            {k: v for k, v in merged.items() if k not in (*_ZERO_COPY, "build_options")}, merged.get("build_options")
        )
        self.options = merged
        return self

    def make_partitioner(self) -> TensorRTPartitioner:
        """A fresh partitioner for the current options (one per stage: a partitioner keeps its last report)."""
        options = {k: v for k, v in self.options.items() if k not in (*_ZERO_COPY, "build_options")}
        return lowering.make_partitioner(options, self.options.get("build_options"))

    def _export_stage(self, dynamic_shapes=None) -> Export:
        return Export(dynamic_shapes, strict=self.strict_export, program=self.program)

    def _to_edge_stage(self, edge_compile_config: EdgeCompileConfig | None = None):
        return BaseStages.ToEdge(edge_compile_config or self.edge_compile_config)

    def _partition_stage(self, partitioner: Partitioner | None = None):
        return BaseStages.Partition(partitioner or self.make_partitioner())

    def _to_edge_transform_and_lower_stage(self, partitioners: list[Partitioner] | None = None):
        # The base stage keeps ``partitioners`` only when ``default_partitioner_cls`` is given too
        # (``partitioners or [default()] if default is not None else []``), so both are always passed.
        return BaseStages.ToEdgeTransformAndLower(
            default_partitioner_cls=self.make_partitioner,
            partitioners=partitioners,
            edge_compile_config=self.edge_compile_config,
        )

    def _to_executorch_stage(self):
        return BaseStages.ToExecutorch(
            lowering.executorch_config(
                zero_copy_inputs=self.options.get("zero_copy_inputs", True),
                zero_copy_outputs=self.options.get("zero_copy_outputs", False),
            )
        )

    def to_edge_transform_and_lower(self, stage=None, generate_etrecord: bool = False, *, partitioners=None):
        """The harness stage; ``partitioners`` replace our ``TensorRTPartitioner`` (e.g. a test partitioner)."""
        if stage is None and partitioners is not None:
            stage = self._to_edge_transform_and_lower_stage(partitioners)
        return super().to_edge_transform_and_lower(stage, generate_etrecord=generate_etrecord)

    def lower_with(self, *partitioners: Partitioner) -> Tester:
        """export -> to_edge_transform_and_lower with these partitioners in place of ours (a test partitioner
        hands ``preprocess`` what ours would not); ``to_executorch()`` may follow."""
        return self.export().to_edge_transform_and_lower(partitioners=list(partitioners))

    def lower(self, **options: Any) -> Tester:
        """export -> to_edge_transform_and_lower -> to_executorch -> serialize, as :func:`et_tensorrt.lower`."""
        self.set_options(**options)
        start = time.perf_counter()
        self.export().to_edge_transform_and_lower().to_executorch().serialize()
        self.lower_seconds = time.perf_counter() - start
        self._runner = et_tensorrt.Runner(self.pte)
        return self

    # -- artifacts ---------------------------------------------------------------------------------

    @property
    def pte(self) -> bytes | None:
        stage = self.stages.get(StageType.SERIALIZE)
        return None if stage is None else stage.artifact

    @property
    def exported_program(self) -> torch.export.ExportedProgram:
        """The EXPORT stage's program (what the partitioner saw before edge decompositions)."""
        return self.get_artifact(StageType.EXPORT)

    @property
    def edge(self):
        """The lowered EdgeProgramManager (to_edge_transform_and_lower, or to_edge + partition)."""
        for stage_type in (StageType.TO_EDGE_TRANSFORM_AND_LOWER, StageType.PARTITION):
            if self.stages.get(stage_type) is not None:
                return self.stages[stage_type].artifact
        raise AssertionError("no lowering stage ran yet: lower() or to_edge_transform_and_lower() first")

    @property
    def report(self):
        return self.partition_report()

    def partition_report(self):
        """The ``PartitionReport`` of the last lowering stage that ran, or None (a test partitioner has none)."""
        for stage_type in (StageType.TO_EDGE_TRANSFORM_AND_LOWER, StageType.PARTITION):
            stage = self.stages.get(stage_type)
            if stage is None:
                continue
            parts = getattr(stage, "partitioners", None) or [getattr(stage, "partitioner", None)]
            for p in parts:
                if isinstance(p, TensorRTPartitioner) and p.report is not None:
                    return p.report
        return None

    @property
    def runner(self) -> et_tensorrt.Runner:
        if self._runner is None:
            assert self.pte is not None, "lower() (or serialize()) first"
            self._runner = et_tensorrt.Runner(self.pte)
        return self._runner

    @property
    def blobs(self) -> list[bytes]:
        """The delegate blobs inside the serialized program, as the runtime reads them."""
        return delegate_blobs(self.pte)

    def lowered_blobs(self) -> list:
        """``[(Blob, partition ExportedProgram)]`` of the lowered edge program, in graph order."""
        return lowered_blobs(self.edge)

    def check_blobs(self, *, expect_engine: bool = True) -> list:
        """Every blob against its partition (:func:`~et_tensorrt.testing.blob_checks.check_blob`); returns the
        blobs' embedded programs, in graph order."""
        return [check_blob(blob, partition, expect_engine=expect_engine) for blob, partition in self.lowered_blobs()]

    # -- checks on the partitioning ----------------------------------------------------------------

    def _delegate_calls(self) -> int:
        graph = self.edge.exported_program().graph
        delegate = torch._higher_order_ops.executorch_call_delegate
        return sum(1 for n in graph.nodes if n.op == "call_function" and n.target == delegate)

    def check_partitions(self, count: int) -> Tester:
        """``count`` delegates: in the partition report, in the lowered graph and, once serialized, in the program."""
        report = self.report
        if report is not None:
            assert len(report.partitions) == count, f"{len(report.partitions)} partition(s), not {count}:\n{report}"
        assert self._delegate_calls() == count, f"{self._delegate_calls()} delegate call(s), not {count}\n{report}"
        if self.pte is not None:
            assert len(self.blobs) == count, f"{len(self.blobs)} delegate blob(s) in the program, not {count}"
        return self

    def check_delegated_all(self) -> Tester:
        """No call node kept on the host."""
        report = self._report()
        assert not report.host_nodes, f"kept on host: {report.host_nodes}\n{report}"
        return self

    def check_host_nodes(self, names: Sequence[str]) -> Tester:
        """Exactly these nodes (by name, in graph order) are kept on the host."""
        report = self._report()
        assert list(report.host_nodes) == list(names), str(report)
        return self

    def _report(self):
        report = self.report
        assert report is not None, "no TensorRTPartitioner report: lower() first"
        return report

    # -- running -----------------------------------------------------------------------------------

    def _inputs(self, inputs) -> tuple:
        if inputs is None:
            return self.example_inputs
        return (inputs,) if isinstance(inputs, torch.Tensor) else tuple(inputs)

    def run_runner(self, inputs: Sequence[torch.Tensor] | torch.Tensor | None = None, **kwargs: Any) -> Tester:
        """Run the program through :class:`et_tensorrt.Runner` (``kwargs`` go to ``Runner.run``)."""
        self.last_inputs = self._inputs(inputs)
        self.runner_outputs = self.runner.run(list(self.last_inputs), **kwargs)
        self.executorch_outputs = []  # an earlier run's, of other inputs: check_parity must not compare them
        return self

    def run_executorch(self, inputs: Sequence[torch.Tensor] | torch.Tensor | None = None) -> Tester:
        """Run the same bytes through ExecuTorch's own runtime (``executorch.runtime``)."""
        self.last_inputs = self._inputs(inputs)
        self.executorch_outputs = run_executorch(self.pte, self.last_inputs)
        self.runner_outputs = []
        return self

    def run_both(self, inputs: Sequence[torch.Tensor] | torch.Tensor | None = None) -> Tester:
        runner_outputs = self.run_runner(inputs).runner_outputs
        self.run_executorch(inputs).runner_outputs = runner_outputs
        return self

    # -- checks on the outputs ---------------------------------------------------------------------

    def expected(self, inputs: Sequence[torch.Tensor] | None = None) -> list[torch.Tensor]:
        """Eager PyTorch on ``inputs`` (default: the inputs of the last run)."""
        return eager(self.original_module, self.last_inputs if inputs is None else self._inputs(inputs))

    def check_parity(self, *, exact: bool = False, tolerances: Tolerances = SAME_MATH) -> Tester:
        """The entry points that ran (``run_both``: both) against eager PyTorch, on the inputs of the last run.

        ``tolerances``: ``parity.SAME_MATH`` by default (the PyTorch fallback runs the decomposed edge graph,
        eager the module: last-bit differences); ``exact``: bitwise equal — only where observed to hold.
        """
        expected = self.expected()
        ran = [
            (name, got)
            for name, got in (("Runner", self.runner_outputs), ("executorch.runtime", self.executorch_outputs))
            if got
        ]
        assert ran, "run_runner(), run_executorch() or run_both() first"
        for name, got in ran:
            result = compare(expected, got, EXACT if exact else tolerances)
            assert result.passed, f"{name} vs eager ({result.tolerances}): " + "; ".join(result.failures())
        # The two entry points run the same delegate on the same inputs: they must agree bit for bit.
        for i, (a, b) in enumerate(zip(self.runner_outputs, self.executorch_outputs)):
            assert torch.equal(a, b), f"output {i}: Runner and executorch.runtime disagree"
        return self

    # -- quantized programs ------------------------------------------------------------------------

    def quantization(self) -> list[dict | None]:
        """Per blob, what its partition's quantization became (METADATA ``quantization``; None: not quantized)."""
        from et_tensorrt.format.blob import read_blob

        return [read_blob(b).metadata.get("quantization") for b in self.blobs]

    def check_quantization(
        self, *, weights: dict[str, int], activations: dict[str, int] | None = None, dropped: int = 0
    ) -> Tester:
        """One engine whose weights (quantized type -> count) and kept activation Q/DQ are these, and which ran
        ``dropped`` activation Q/DQ in float."""
        (got,) = self.quantization()
        want = {"weights": weights, "activations": activations or {}, "dropped_activation_qdq": dropped}
        assert got == want, f"quantization {got}, expected {want}"
        return self

    def error_share(self, reference: torch.nn.Module | None = None) -> float:
        """The largest difference of the last Runner outputs from ``reference`` (default: the model), as a share of
        each output's largest magnitude."""
        expected = eager(reference, self.last_inputs) if reference is not None else self.expected()
        share = 0.0
        for got, want in zip(self.runner_outputs, expected, strict=True):
            share = max(share, error_share(got, want))
        return share

    def check_quantized_parity(
        self, reference: torch.nn.Module | None = None, share: float = QUANTIZED_SHARE
    ) -> Tester:
        """The last Runner outputs within ``share`` of each output's absmax of ``reference`` (the quantized eager
        model, or what its engine computes: the weight-only reading of dynamic activation quantization)."""
        assert self.runner_outputs, "run_runner() first"
        got = self.error_share(reference)
        assert got <= share, f"Runner differs from the quantized eager model by {got:.2%} of the output's absmax"
        return self

    def max_abs_error(self) -> float:
        """The largest difference of the last Runner outputs from eager (mismatching count for integers)."""
        err = 0.0
        for g, e in zip(self.runner_outputs, self.expected()):
            if g.is_floating_point():
                err = max(err, (g - e).abs().max().item())
            else:
                err = max(err, float((g != e).sum().item()))
        return err
