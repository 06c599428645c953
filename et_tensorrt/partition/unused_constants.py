"""Constants (lifted tensors, parameters, buffers nothing mutates) that no node of the program reads: handed to a
partition, so that they do not stay in the top-level program.

They appear when ExecuTorch's edge passes remove their last reader: ``PruneEmptyTensorsPass`` drops the empty
tensors a ``cat`` starts from (HF's ``DynamicLayer`` before its first update: transformers' static-cache
encoder-decoder export has four). Left in the program, ExecuTorch emits them into its constant segment; when every
constant the program keeps has zero bytes that segment is empty, a file's mapped loader returns no memory for it,
and ExecuTorch then takes the program for one of the deprecated ``constant_buffer`` kind and refuses every method
(``constant_buffer path is disabled``, error 35) although the same bytes load from memory. A partitioner may not
edit the graph (ExecuTorch checks), so they are tagged: lowering moves them into the delegate, which ignores them.
"""

from __future__ import annotations

from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind


def tag_unused_constants(program: ExportedProgram, tag: str) -> list[str]:
    """Tags with ``tag`` the constant inputs of ``program`` that no node reads; returns their targets."""
    signature = program.graph_signature
    mutated = set(signature.buffers_to_mutate.values())
    kinds = (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)
    constants = {s.arg.name: s.target for s in signature.input_specs if s.kind in kinds and s.target not in mutated}
    tagged = []
    for node in program.graph.nodes:
        if node.op == "placeholder" and node.name in constants and not node.users:
            node.meta["delegation_tag"] = tag
            tagged.append(constants[node.name])
    return tagged
