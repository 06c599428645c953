"""Mutable buffers (a KV cache, a counter) handed to the partition that mutates them.

ExecuTorch's mechanism is ``exir.backend.utils.tag_mutated_buffer``: a buffer placeholder tagged like the
nodes that use it moves, with its mutation, into the delegate's program, and the top-level write-back
(``aten::copy_`` of the updated value into ExecuTorch's buffer) disappears. The delegate then owns the storage
across calls (docs/stateful-decode.md). A buffer is only handed over when one partition holds every node that
reads it and the node that computes its new value; otherwise it stays ExecuTorch's (the delegate then takes it
as an input and returns the update, and ExecuTorch copies it back), and the decision says why.
"""

from __future__ import annotations

from dataclasses import dataclass

from executorch.exir.backend.utils import tag_mutated_buffer
from torch.export import ExportedProgram


@dataclass(frozen=True)
class StateDecision:
    buffer: str  # the buffer's fully qualified name (``layers.0.attention.kv_cache.k_cache``)
    partition: str | None  # the delegation tag that owns it, None when it stays ExecuTorch's
    reason: str = ""  # why it stays ExecuTorch's

    def __str__(self) -> str:
        if self.partition is not None:
            return f"state {self.buffer}: owned by {self.partition}"
        return f"state {self.buffer}: stays ExecuTorch's ({self.reason})"


def own_mutable_buffers(program: ExportedProgram) -> list[StateDecision]:
    """Tags every mutated buffer whose readers and writer are all in one partition (after op tagging) with
    that partition's tag; returns one decision per mutated buffer."""
    signature = program.graph_signature
    writers = {target: name for name, target in signature.buffers_to_mutate.items()}  # buffer -> output node name
    nodes = {n.name: n for n in program.graph.nodes}
    tag_mutated_buffer(program)
    decisions = []
    for node in program.graph.nodes:
        target = signature.inputs_to_buffers.get(node.name) if node.op == "placeholder" else None
        if target not in writers:
            continue
        writer = nodes.get(writers[target])
        tags = {u.meta.get("delegation_tag") for u in node.users}
        writer_tag = writer.meta.get("delegation_tag") if writer is not None else None
        reason = ""
        if None in tags:
            reason = "a node kept on the host reads it"
        elif len(tags) > 1:
            reason = f"partitions {', '.join(sorted(tags))} all read it"
        elif writer_tag is None or writer_tag not in tags:
            reason = "its new value is computed outside the partition that reads it"
        if reason:
            node.meta.pop("delegation_tag", None)
            decisions.append(StateDecision(target, None, reason))
        else:
            decisions.append(StateDecision(target, node.meta["delegation_tag"]))
    return decisions
