"""A partition holds at most ``max_partition_weights`` bytes of weights: a larger one is split along the graph.

TensorRT's builder works with a copy of a partition's weights (measured with TensorRT-RTX 1.7: about 1.3 to 1.8
times their size at its peak, on top of the program's own), so the memory a lowering needs grows with its largest
partition, not with the model. Splitting an LLM's one big partition into engines of about 1 GiB of weights each
bounds that: the lowering needs the model plus one engine's build. Each piece is a run of the partition's nodes
in graph order, and such a run of a convex partition is convex (nothing leaves it and comes back), so ExecuTorch
fuses each as it would the whole.

A split falls only where it is safe: between nodes where every value that crosses is a tensor computed from the
inputs (a size or a tuple never leaves a partition, see size_rule.py; a transposed, cast or dequantized weight
stays with its reader; a quantized activation or its scales stay with their dequantize: a Q/DQ pair is one
engine's, partition/quantized.py), and not inside the span of a mutable buffer (its readers and the node
computing its new value stay together, so the delegate can own it: mutable_state.py). Between transformer layers
all hold. A piece that cannot be cut small enough stays larger.
"""

from __future__ import annotations

import operator

import torch
from torch.fx import Node

from ..quantization import qdq

DEFAULT_MAX_PARTITION_WEIGHTS = 2**30  # bytes


def weight_bytes(program) -> dict[str, int]:
    """Placeholder name -> bytes of the parameter, buffer or constant it lifts (fake tensors count too)."""
    signature = program.graph_signature
    sources = {
        **{name: program.state_dict.get(t) for name, t in signature.inputs_to_parameters.items()},
        **{name: program.state_dict.get(t) for name, t in signature.inputs_to_buffers.items()},
        **{name: program.constants.get(t) for name, t in signature.inputs_to_lifted_tensor_constants.items()},
    }
    return {name: t.numel() * t.element_size() for name, t in sources.items() if isinstance(t, torch.Tensor)}


def _buffer_spans(program, index: dict[str, int]) -> list[tuple[int, int]]:
    """Per mutable buffer touched by the nodes in ``index`` (name -> position): the positions of its first and
    last toucher (its readers and the node computing its new value)."""
    signature = program.graph_signature
    writers = {target: name for name, target in signature.buffers_to_mutate.items()}
    spans = []
    for node in program.graph.nodes:
        target = signature.inputs_to_buffers.get(node.name) if node.op == "placeholder" else None
        if target not in writers:
            continue
        touched = [index[u.name] for u in node.users if u.name in index]
        if writers[target] in index:
            touched.append(index[writers[target]])
        if len(touched) > 1:
            spans.append((min(touched), max(touched)))
    return spans


def _cuttable(nodes: list[Node], program, weights: dict[str, int]) -> list[bool]:
    """``cut[k]``: a split between ``nodes[k - 1]`` and ``nodes[k]`` is safe (k = 1 .. len - 1)."""
    index = {n.name: i for i, n in enumerate(nodes)}
    last_use = []
    for i, n in enumerate(nodes):
        uses = [index[u.name] for u in n.users if u.name in index]
        last_use.append(max(uses, default=i))
    # A value computed from weights alone (a linear's transposed weight, a cast weight) stays with its reader:
    # across a cut it would be an engine's constant output, the weight's size copied every call.
    from_weights: set[str] = set()
    for n in nodes:
        inputs = n.all_input_nodes
        if inputs and all(a.name in weights or a.name in from_weights for a in inputs):
            from_weights.add(n.name)
    blocked = [0] * (len(nodes) + 1)  # values crossing each cut that may not, and buffer spans
    for i, n in enumerate(nodes):
        stays = n.name in from_weights or _quantized_value(n)
        if last_use[i] > i and (not isinstance(n.meta.get("val"), torch.Tensor) or stays):
            blocked[i + 1] += 1
            blocked[last_use[i] + 1] -= 1
    for first, last in _buffer_spans(program, index):
        blocked[first + 1] += 1
        blocked[last + 1] -= 1
    cut, open_ = [False] * len(nodes), 0
    for k in range(len(nodes)):
        open_ += blocked[k]
        cut[k] = k > 0 and open_ == 0
    return cut


def _quantized_value(node: Node) -> bool:
    """A quantize's or choose_qparams' result (or an item of it): it may only reach its dequantize in the same
    engine (a Q/DQ pair split between partitions is refused)."""
    source = node.args[0] if node.target is operator.getitem and isinstance(node.args[0], Node) else node
    q = qdq.read(source)
    return q is not None and q.kind != qdq.DEQUANTIZE


def split_by_weights(nodes: list[Node], program, limit: int | None, weights: dict[str, int]) -> list[list[Node]]:
    """``nodes`` (one partition, graph order) as runs of at most ``limit`` bytes of weights where safe cuts allow
    (``weights``: :func:`weight_bytes`; a weight read on both sides of a cut counts on both)."""
    if not limit or sum(weights.get(a.name, 0) for n in nodes for a in n.all_input_nodes) <= limit:
        return [nodes]
    cut = _cuttable(nodes, program, weights)
    pieces, start, held, seen, best = [], 0, 0, set(), None
    for k, node in enumerate(nodes):
        if k > start and cut[k]:
            best = k  # the furthest safe cut so far in this piece
        added = sum(weights.get(a.name, 0) for a in node.all_input_nodes if a.name not in seen)
        if held + added > limit and held > 0 and best is not None:
            pieces.append(nodes[start:best])
            start = best
            best = max((j for j in range(start + 1, k + 1) if cut[j]), default=None)
            seen = {a.name for n in nodes[start : k + 1] for a in n.all_input_nodes}
            held = sum(weights.get(name, 0) for name in seen)
            continue
        seen |= {a.name for a in node.all_input_nodes}
        held += added
    pieces.append(nodes[start:])
    return pieces
