"""The partition's ``PreprocessResult.debug_handle_map``: which source nodes each of the delegate's ETDump events
stands for, so ``executorch.devtools.Inspector`` given an ETRecord of the lowering names the ops behind them
(docs/profiling.md, "ETRecord").

The delegate logs its events by name (extension/runtime/delegate_events.h: ExecuTorch takes a name or an int id per
event, and Inspector shows an int id as the event's name), so the map is keyed by those names. ExecuTorch keeps one
map per delegate call, so the same names in several partitions resolve each to its own partition's nodes:

- the executor's run (``tensorrt`` or ``pytorch fallback``: which one runs is decided at init, on the device) and
  ``init`` (the engine's deserialization or build, the fallback's load; ``init 2/3`` when the method has several
  partitions): every computing node of the partition;
- ``input copies``: the nodes that read a partition input; ``output copies``: the nodes whose values leave the
  partition. Where there is none (an input passed straight through), every node, as for the run.

ExecuTorch logs every delegate's init outside any instruction (chain -1, instruction 0), so Inspector resolves all
init events through the map of the method's instruction 0: :func:`share_init_entries` gives each partition's map
every partition's init entry, and they resolve when the method begins with one of our delegates (else Inspector
gives them the handles of the op at instruction 0, and says so in a warning).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch.export import ExportedProgram
    from torch.fx import Node

# The delegate's event names, as extension/runtime/delegate_events.{h,cpp} spell them (the ETDump test checks that
# every event the runtime logs is a key of the map).
INIT = "init"
INPUTS = "input copies"
OUTPUTS = "output copies"
EXECUTORS = ("tensorrt", "pytorch fallback")  # delegate_events.cpp's executor_event_name of each executor


def init_event_name(partition: int, partitions: int) -> str:
    """delegate_events.cpp's ``init_event_name``: ``init``, with ``i/n`` when the method has several partitions."""
    return INIT if partitions <= 1 else f"{INIT} {partition}/{partitions}"


def debug_handle_map(
    edge_program: ExportedProgram, partition: int = 0, partitions: int = 0
) -> dict[str, tuple[int, ...]] | None:
    """Event name -> the sorted debug handles of the partition's source nodes it stands for; None when the
    partition's nodes carry no debug handle (a program that did not come through ``to_edge``). ``partition`` of
    ``partitions``: its place among the method's partitions (the compile specs', 1-based), naming its init event."""
    computing = [n for n in edge_program.graph.nodes if n.op == "call_function"]
    every = _handles(computing)
    if not every:
        return None
    user_inputs = set(edge_program.graph_signature.user_inputs)
    readers = [n for n in computing if any(a.op == "placeholder" and a.name in user_inputs for a in n.all_input_nodes)]
    user_outputs = set(edge_program.graph_signature.user_outputs)
    producers = [n for n in computing if n.name in user_outputs]
    mapping = {
        init_event_name(partition, partitions): every,
        INPUTS: _handles(readers) or every,
        OUTPUTS: _handles(producers) or every,
    }
    mapping.update(dict.fromkeys(EXECUTORS, every))
    return mapping


def share_init_entries(maps: list[dict | None]) -> None:
    """Gives each of one method's partition maps every partition's init entry (in place; see the module's
    docstring for why)."""
    inits = {name: handles for m in maps if m for name, handles in m.items() if _is_init(name)}
    for m in maps:
        if m is not None:
            m.update(inits)


def _is_init(name: str) -> bool:
    return name == INIT or name.startswith(INIT + " ")


def _handles(nodes: list[Node]) -> tuple[int, ...]:
    found: set[int] = set()
    for node in nodes:
        handle = node.meta.get("debug_handle")
        if isinstance(handle, int):
            found.add(handle)
        elif isinstance(handle, (tuple, list)):  # ExecuTorch's fused nodes carry several
            found.update(h for h in handle if isinstance(h, int))
    return tuple(sorted(found))
