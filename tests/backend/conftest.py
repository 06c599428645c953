"""Test-only partitioner for the backend tests: tags call_function nodes into one or N partitions."""

from __future__ import annotations

import operator

import torch
from executorch.exir.backend.partitioner import DelegationSpec, Partitioner, PartitionResult
from executorch.exir.backend.utils import tag_constant_data

import et_tensorrt.backend  # noqa: F401  (registers EtTensorRTBackend among BackendDetails subclasses)
from et_tensorrt import compile_specs as cs


class SplitPartitioner(Partitioner):
    """Every call_function node goes into a partition; ``split_after`` names nodes (by target) after which
    a new partition starts, with the node ``split_after`` itself left to the host."""

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
        # getitem of a multi-output node must stay with its producer
        tags = {}
        for i, group in enumerate(groups):
            opts = dict(self.options)
            opts["et_tensorrt.partition_index"] = i + 1
            opts["et_tensorrt.partition_count"] = len(groups)
            tag = f"tag{i}"
            tags[tag] = DelegationSpec(cs.BACKEND_ID, cs.encode(opts))
            for node in group:
                node.meta["delegation_tag"] = tag
        for node in exported_program.graph_module.graph.nodes:
            if node.op == "call_function" and node.target is operator.getitem:
                node.meta["delegation_tag"] = node.args[0].meta.get("delegation_tag")
        tag_constant_data(exported_program)
        return PartitionResult(tagged_exported_program=exported_program, partition_tags=tags)
