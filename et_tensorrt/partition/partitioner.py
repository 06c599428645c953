"""`TensorRTPartitioner`: tags the nodes a TensorRT engine may run, keeping every recorded device; `explain`."""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Iterable, Mapping

from executorch.exir.backend.partitioner import DelegationSpec, Partitioner, PartitionResult
from executorch.exir.backend.utils import tag_constant_data
from torch.fx import Node
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

# ExecuTorch finds a backend by BACKEND_ID among BackendDetails' subclasses: importing preprocess registers it.
from ..backend.preprocess import EtTensorRTBackend  # noqa: F401
from ..builder.profiles import DynamicDim, encode_dynamic_dims
from ..compile_specs import (
    BACKEND_ID,
    DYNAMIC_DIMS,
    EXECUTION_DEVICE,
    METHOD_INPUT_NAMES,
    PARTITION_COUNT,
    PARTITION_INDEX,
    BuildOptions,
    encode,
)
from ..errors import PartitionError, PlacementWarning, UnmatchedOpWarning
from ..quantization import qdq
from . import device_rules, pre_decomposition, quantized
from .argument_limits import argument_refusal
from .dynamic_dims import declared_ranges, input_dim_ranges, pinned_dims, resolve_opt_sizes
from .method_inputs import encode_names, user_input_names
from .mutable_state import own_mutable_buffers
from .report import NodeDecision, PartitionReport, Reason, ReasonCode
from .size_rule import symbolic_crossings
from .supported_ops import (
    NON_COMPUTE_OPS,
    SUPPORTED_OPS,
    VIEW_OPS,
    dtype_refusal,
    op_name,
    packet_name,
    user_spellings,
)
from .unused_constants import tag_unused_constants
from .weight_split import DEFAULT_MAX_PARTITION_WEIGHTS, split_by_weights, weight_bytes

TAG_PREFIX = "et_tensorrt_"


class _Accepted(OperatorSupportBase):
    def __init__(self, names: Iterable[str]):
        super().__init__()
        self._names = frozenset(names)

    def is_node_supported(self, submodules, node: Node) -> bool:
        return node.name in self._names


def _user_op_names(ops) -> frozenset:
    """``torch_executed_ops`` entries (OpOverload, packet, edge op or string) as names."""
    names = set()
    for op in ops:
        names.add(op if isinstance(op, str) else op_name(op))
    return frozenset(names)


def unmatched_ops(torch_executed_ops: Iterable[str], report: PartitionReport) -> dict[str, list[str]]:
    """``torch_executed_ops`` entries that match no node of the report (by op or packet name) -> up to three
    close op names of the program."""
    ops = sorted({d.op for d in report.nodes})
    seen = set(ops) | {packet_name(op) for op in ops}
    out = {}
    for entry in sorted(set(torch_executed_ops) - seen):
        bare = entry.split(".")[1] if entry.count(".") >= 1 else entry
        close = [op for op in ops if bare and bare in op.split(".")[1:2]]
        close += [op for op in difflib.get_close_matches(entry, ops, n=3, cutoff=0.6) if op not in close]
        out[entry] = close[:3]
    return out


class TensorRTPartitioner(Partitioner):
    """Delegates to ``EtTensorRTBackend`` the nodes that pass placement, cast, capability and user
    rules (see ``et_tensorrt.partition``), in partitions of at least ``min_block_size`` compute nodes (or the
    method's whole graph, however small: no host op around it for an engine to cost transfers against).

    ``compile_specs``: further backend options (``et_tensorrt.compile_specs`` keys -> value); the
    execution device always comes from ``target_device``. The last report is kept on ``.report``.

    ``opt_sizes``: the sizes TensorRT tunes kernels for, per dynamic dim, named by its ``Dim`` name
    (``{"batch": 8}``) or ``"input:dim"`` (``{"x:0": 8}``); a list (``{"batch": [1, 64]}``) builds one
    optimization profile per size, splitting the dim's range between them. Default: the example size.

    ``max_partition_weights``: a partition holding more weight bytes is split where it is safe (weight_split.py),
    so TensorRT builds engines of about this size and a lowering's memory is the model plus one engine's build
    (default 1 GiB; None: never split).
    """

    def __init__(
        self,
        target_device="cuda:0",
        min_block_size: int = 5,
        torch_executed_ops=(),
        require_full_compilation: bool = False,
        compile_specs: Mapping[str, object] | None = None,
        opt_sizes: Mapping[str, object] | None = None,
        own_mutable_buffers: bool = True,
        max_partition_weights: int | None = DEFAULT_MAX_PARTITION_WEIGHTS,
    ):
        super().__init__()
        if min_block_size < 1:
            raise ValueError(f"min_block_size must be >= 1, got {min_block_size}")
        options = dict(compile_specs or {})
        if EXECUTION_DEVICE in options:
            raise ValueError(f"pass the device as target_device, not as {EXECUTION_DEVICE!r}")
        self.target_device = device_rules.engine_device(target_device)
        self.min_block_size = min_block_size
        self.torch_executed_ops = _user_op_names(torch_executed_ops)
        self.require_full_compilation = require_full_compilation
        options[EXECUTION_DEVICE] = str(self.target_device)
        self.delegation_spec = DelegationSpec(BACKEND_ID, encode(options))
        self.report: PartitionReport | None = None
        self.opt_sizes = dict(opt_sizes or {})
        self.own_mutable_buffers = own_mutable_buffers
        limit = max_partition_weights
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise ValueError(f"max_partition_weights must be bytes >= 1 or None, got {limit!r}")
        self.max_partition_weights = max_partition_weights
        # The program as exported (before to_edge narrowed its ranges), seen by transform_for_pre_decomposition.
        self._declared: dict[str, tuple] | None = None
        self._source_program = None
        self._dynamic_inputs: dict = {}  # (input, dim) -> declared range, read before to_edge
        self._value_problems: list[str] = []

    # -- before ExecuTorch's decompositions (to_edge_transform_and_lower calls this) --------------------

    def transform_for_pre_decomposition(self, exported_program):
        """Record the dynamic ranges as the user declared them (``to_edge`` narrows ``min=1`` to 2) and return
        the program with its sizes read from its inputs and its splits as slices (``pre_decomposition``), so
        that a dynamic program stays dynamic and whole through ``to_edge``. The caller's program is not
        modified."""
        self._declared = declared_ranges(exported_program)
        self._dynamic_inputs = input_dim_ranges(exported_program)
        self._source_program = exported_program
        # partition() sees FakeTensor weights: what needs their values (zero points) is read here
        self._value_problems = qdq.value_problems(exported_program)
        if self.opt_sizes:
            resolve_opt_sizes(self.opt_sizes, exported_program)  # a bad key fails here, before any work
        return pre_decomposition.transform(exported_program)

    def ops_to_not_decompose(self, ep):
        """torchao's quantize/dequantize/choose_qparams ops whole (ExecuTorch would decompose them into arithmetic):
        their Q/DQ chains go into the engines as TensorRT Q/DQ (``partition/quantized.py``)."""
        return qdq.not_decomposed_ops(), None

    # -- the four node rules -------------------------------------------------------------------

    def _refusal(
        self, node: Node, placed: bool, refused: dict[str, Reason], verdicts: dict[str, qdq.Verdict]
    ) -> Reason | None:
        engine = self.target_device
        reason = device_rules.cast_refusal(node, engine) or device_rules.placement_refusal(node, engine, placed)
        if reason is not None:
            return reason
        name = op_name(node.target)
        if name not in SUPPORTED_OPS:
            return Reason(ReasonCode.UNSUPPORTED_OP, name)
        limit = argument_refusal(name, node)
        if limit is not None:
            return Reason(ReasonCode.UNSUPPORTED_ARGS, f"{name}: {limit}")
        if name == "operator.getitem" and node.args[0].name in refused:
            return Reason(ReasonCode.PRODUCER_REFUSED, f"{node.args[0].name} stays on host")
        # A quantization node's dtypes (FP8, int4 in int8, choose_qparams' float64 scales, read by getitem) are its
        # verdict's to judge (qdq.verdicts judges every quantization node).
        judged = node.args[0].name if name == "operator.getitem" else node.name
        if judged in verdicts:
            verdict = verdicts[judged]
            if verdict.action == qdq.REFUSE:
                return Reason(ReasonCode.UNSUPPORTED_QUANTIZATION, f"{verdict.what}: {verdict.why}")
        else:
            reason = self._dtype_refusal(node)
            if reason is not None:
                return reason
        if user_spellings(name) & self.torch_executed_ops:
            return Reason(ReasonCode.USER_TORCH_EXECUTED_OPS, name)
        return None

    @staticmethod
    def _dtype_refusal(node: Node) -> Reason | None:
        for source in [node, *device_rules.input_nodes(node)]:
            for t in device_rules.tensors(source.meta.get("val")):
                code = dtype_refusal(t.dtype)
                if code is not None:
                    return Reason(code, f"{source.name} is {t.dtype}")
        return None

    def _would_drop_device(self, node: Node, reason: Reason, placed: bool) -> bool:
        """Refused only for its device, yet capable: a device-blind partitioner would have absorbed
        it and returned its result on the engine's device."""
        if reason.code not in (ReasonCode.CAST_DEVICE_CHANGE, ReasonCode.DEVICE_HOST_OUTPUT):
            return False
        name = op_name(node.target)
        if name not in SUPPORTED_OPS or user_spellings(name) & self.torch_executed_ops:
            return False
        return all(dtype_refusal(t.dtype) is None for t in device_rules.tensors(node.meta.get("val")))

    # -- analysis, shared by partition() and explain() ----------------------------------------

    def analyze(self, exported_program) -> PartitionReport:
        """Decide every call node (no tagging, no warnings, no raising)."""
        report, _, _ = self._analyze(exported_program)
        return report

    def _analyze(self, exported_program):
        """(report, tags, the quantization nodes' verdicts)."""
        gm = exported_program.graph_module
        placed = device_rules.is_placed(gm.graph)
        calls: list[Node] = [n for n in gm.graph.nodes if n.op == "call_function"]
        verdicts = qdq.verdicts(exported_program, calls)
        refused: dict[str, Reason] = {}
        for node in calls:  # graph order, so a getitem sees its producer's decision
            reason = self._refusal(node, placed, refused, verdicts)
            if reason is not None:
                refused[node.name] = reason
        warned = tuple(
            n.name for n in calls if n.name in refused and self._would_drop_device(n, refused[n.name], placed)
        )

        weights = weight_bytes(exported_program) if self.max_partition_weights else {}
        while True:  # refusing a symbolic boundary node changes the partitions: group again
            tags = self._group(gm, calls, refused, exported_program, weights)
            crossings = symbolic_crossings(calls, tags)
            if not crossings:
                break
            refused.update(crossings)

        decisions = [
            NodeDecision(
                name=n.name,
                op=op_name(n.target),
                devices=device_rules.recorded_devices(n),
                partition=tags.get(n.name),
                reason=None if n.name in tags else refused[n.name],
            )
            for n in calls
        ]
        report = PartitionReport(str(self.target_device), placed, decisions, warned)
        return report, tags, verdicts

    def _group(self, gm, calls: list[Node], refused: dict[str, Reason], program, weights) -> dict[str, str]:
        """Partition tags of the accepted nodes; groups too small or only views are refused (in place); a group
        holding more than ``max_partition_weights`` bytes of weights is split (weight_split.py)."""
        accepted = [n.name for n in calls if n.name not in refused]
        order = {n: i for i, n in enumerate(gm.graph.nodes)}
        proposals = CapabilityBasedPartitioner(
            gm, _Accepted(accepted), allows_single_node_partition=True
        ).propose_partitions()
        groups = sorted(
            (sorted(p.nodes, key=order.__getitem__) for p in proposals),
            key=lambda nodes: order[nodes[0]],
        )
        tags: dict[str, str] = {}
        for nodes in groups:
            size = sum(op_name(n.target) not in NON_COMPUTE_OPS for n in nodes)
            # min_block_size weighs an engine against the host ops around it; a group that is the method's whole
            # computation has none (a multimodal program's token_embedding: one embedding), so it is an engine
            whole = size > 0 and len(nodes) == len(calls)
            if size < self.min_block_size and not whole:
                for n in nodes:
                    refused[n.name] = Reason(ReasonCode.MIN_BLOCK_SIZE, f"partition of {size} < {self.min_block_size}")
                continue
            if len(nodes) < len(calls) and all(op_name(n.target) in VIEW_OPS | NON_COMPUTE_OPS for n in nodes):
                # Unless it is the whole graph: an engine that only reshapes costs two copies, buys nothing.
                for n in nodes:
                    refused[n.name] = Reason(
                        ReasonCode.VIEW_ONLY, "a partition of only view/shape ops computes nothing"
                    )
                continue
            for piece in split_by_weights(nodes, program, self.max_partition_weights, weights):
                tag = f"{TAG_PREFIX}{len(set(tags.values()))}"
                for n in piece:
                    tags[n.name] = tag
        return tags

    # -- the ExecuTorch Partitioner interface -------------------------------------------------

    def partition(self, exported_program) -> PartitionResult:
        self._check_still_dynamic(exported_program)
        report, tags, verdicts = self._analyze(exported_program)
        self.report = report
        # A quantized program lowers whole or not at all: one error before any engine is built (or one warning).
        build = BuildOptions.from_specs(self.delegation_spec.compile_specs)
        quantized.check(exported_program, report, verdicts, build, self._value_problems)
        for name in report.warned:
            warnings.warn(
                f"et_tensorrt: node {name!r} is kept on the host ({report.host_nodes[name]}); a "
                f"partitioner that ignores placement would have absorbed it into the "
                f"{report.engine_device} engine and dropped its recorded device",
                PlacementWarning,
                stacklevel=2,
            )
        for op, close in unmatched_ops(self.torch_executed_ops, report).items():
            hint = f"; did you mean {' or '.join(close)}?" if close else ""
            warnings.warn(
                f"et_tensorrt: torch_executed_ops entry {op!r} matches no node of this program (the partitioner "
                f"sees ops after ExecuTorch's decompositions){hint}",
                UnmatchedOpWarning,
                stacklevel=2,
            )
        if self.require_full_compilation and report.host_nodes:
            listing = "\n".join(f"  {n}: {r}" for n, r in report.host_nodes.items())
            raise PartitionError(
                f"require_full_compilation=True but {len(report.host_nodes)} node(s) stay on the host:\n{listing}"
            )
        # ExecuTorch's to_edge hands the caller's ``constants`` dict on by reference, and lowering deletes
        # from it every constant a delegate takes (tag_constant_data below): without a copy the caller's
        # ExportedProgram loses its lifted tensors and ``ep.module()`` fails with a KeyError.
        exported_program._constants = dict(exported_program.constants)
        for node in exported_program.graph_module.graph.nodes:
            node.meta.pop("delegation_tag", None)  # a re-run must not keep stale tags
            if node.name in tags:
                node.meta["delegation_tag"] = tags[node.name]
        tag_constant_data(exported_program)
        if tags:  # left on the host, unread constants can make the .pte unloadable from a file (unused_constants.py)
            tag_unused_constants(exported_program, min(tags.values(), key=lambda t: int(t[len(TAG_PREFIX) :])))
        if self.own_mutable_buffers:
            report.states = own_mutable_buffers(exported_program)
        specs = self._specs(tags, exported_program)
        # used once: the next program brings its own
        self._declared, self._source_program, self._value_problems, self._dynamic_inputs = None, None, [], {}
        return PartitionResult(tagged_exported_program=exported_program, partition_tags=specs)

    def _check_still_dynamic(self, exported_program) -> None:
        """A dim declared dynamic that ExecuTorch's ``to_edge`` pinned to its example size would make a program
        (and engines) for that size alone: refused here, by name, instead of failing later (an engine whose
        shapes do not add up) or silently."""
        pinned = pinned_dims(self._dynamic_inputs, exported_program)
        if pinned:
            self._declared, self._source_program, self._value_problems, self._dynamic_inputs = None, None, [], {}
            raise PartitionError(
                f"ExecuTorch's to_edge fixed dynamic dims to their example sizes: {'; '.join(pinned)}. An op of the "
                "program pinned them (ExecuTorch's edge verifier reads the size of the first piece an op returning "
                "a list of tensors produces: et_tensorrt turns split, chunk and unbind along a static dim into "
                "slices before to_edge, not other such ops); export those dims static, or replace that op"
            )

    def _specs(self, tags: dict[str, str], exported_program) -> dict[str, DelegationSpec]:
        """One DelegationSpec per partition: the shared options, the dynamic dims, the method's input names (as
        the program before ``to_edge`` names them) and "engine i/n" for build progress."""
        ordered = sorted(set(tags.values()), key=lambda t: int(t[len(TAG_PREFIX) :]))
        shared = dict(self._dynamic_dims_spec(exported_program))
        shared[METHOD_INPUT_NAMES] = encode_names(user_input_names(self._source_program or exported_program))
        return {
            tag: DelegationSpec(
                BACKEND_ID,
                self.delegation_spec.compile_specs
                + encode({**shared, PARTITION_INDEX: i, PARTITION_COUNT: len(ordered)}),
            )
            for i, tag in enumerate(ordered, 1)
        }

    def _dynamic_dims_spec(self, exported_program) -> dict[str, str]:
        """``DYNAMIC_DIMS``: per symbol, its declared range (when the program before ``to_edge`` was seen) and
        the user's opt sizes; empty for a static program."""
        declared = self._declared or {}
        opts = resolve_opt_sizes(self.opt_sizes, self._source_program or exported_program) if self.opt_sizes else {}
        symbols = sorted(set(declared) | set(opts))
        if not symbols:
            return {}
        dims = {s: DynamicDim(declared.get(s), opts.get(s, ())) for s in symbols}
        return {DYNAMIC_DIMS: encode_dynamic_dims(dims)}


class _Explaining(TensorRTPartitioner):
    """Analyzes what it is handed inside ExecuTorch's lowering and tags nothing (see ``explain``)."""

    def partition(self, exported_program) -> PartitionResult:
        self.report = self.analyze(exported_program)
        return PartitionResult(tagged_exported_program=exported_program, partition_tags={})


def explain(exported_program, **partitioner_options) -> PartitionReport:
    """Report what ``et_tensorrt.lower(exported_program, **partitioner_options)`` will delegate, node by node.

    An edge program (``to_edge``'s output) is analyzed as it is. Any other program first goes through
    what lowering does before partitioning: ``constant_masks.fold_constant_masks``, then
    ``to_edge_transform_and_lower`` with this partitioner, so
    ExecuTorch's default decompositions (minus the ops the partitioner keeps whole, see
    ``ops_to_not_decompose``) and the edge passes, and the report names the edge nodes ``lower`` sees.
    The caller's program is not modified. Nothing is tagged or built, ``require_full_compilation`` does not
    raise, no warning is emitted (``.warned`` lists them), and ExecuTorch's IR validity check is off
    (it only verifies; the graph is the one lowering partitions).
    """
    partitioner = _Explaining(**partitioner_options)
    if getattr(exported_program, "dialect", None) == "EDGE":
        return partitioner.analyze(exported_program)
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

    from .constant_masks import fold_constant_masks

    to_edge_transform_and_lower(
        fold_constant_masks(exported_program),
        partitioner=[partitioner],
        compile_config=EdgeCompileConfig(_check_ir_validity=False),
    )
    return partitioner.report
