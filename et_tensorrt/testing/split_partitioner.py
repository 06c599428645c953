"""A test-only partitioner: every call node is delegated, into one partition or several.

The backend tests use it to hand ``preprocess`` graphs the real partitioner would not (a node it keeps on
the host, a split at a chosen op), so that preprocess's own checks and refusals are what is tested.
"""

from __future__ import annotations

import operator

from executorch.exir.backend.partitioner import DelegationSpec, Partitioner, PartitionResult
from executorch.exir.backend.utils import tag_constant_data

import et_tensorrt.backend  # noqa: F401  (registers EtTensorRTBackend among BackendDetails subclasses)
from et_tensorrt import compile_specs as cs


class SplitPartitioner(Partitioner):
    """Every call_function node goes into a partition; a node whose target starts with one of ``host_ops``
    stays on the host and ends the partition before it (the next delegated node starts a new one).

    ``options`` are compile specs (key -> value); ONNX validation is on unless they turn it off.
    """

    def __init__(self, options=None, host_ops=()):
        self.options = {cs.VALIDATE: True, **(options or {})}
        self.host_ops = tuple(host_ops)
        super().__init__()

    def partition(self, exported_program) -> PartitionResult:
        groups, current = [], []
        for node in exported_program.graph_module.graph.nodes:
            if node.op != "call_function":
                continue
            target = getattr(node.target, "_op", node.target)
            if any(str(target).startswith(h) for h in self.host_ops):
                if current:
                    groups.append(current)
                current = []
                continue
            current.append(node)
        if current:
            groups.append(current)
        tags = {}
        for i, group in enumerate(groups):
            opts = dict(self.options)
            opts[cs.PARTITION_INDEX] = i + 1
            opts[cs.PARTITION_COUNT] = len(groups)
            tag = f"tag{i}"
            tags[tag] = DelegationSpec(cs.BACKEND_ID, cs.encode(opts))
            for node in group:
                node.meta["delegation_tag"] = tag
        # getitem of a multi-output node must stay with its producer
        for node in exported_program.graph_module.graph.nodes:
            if node.op == "call_function" and node.target is operator.getitem:
                node.meta["delegation_tag"] = node.args[0].meta.get("delegation_tag")
        tag_constant_data(exported_program)
        return PartitionResult(tagged_exported_program=exported_program, partition_tags=tags)
