"""The partition's aten program as blob sections: GRAPH (torch.export's JSON) and WEIGHTS (raw tensors).

Nothing is pickled. Node metadata (stack traces with the user's file paths, module stacks) is dropped:
the loader would drop it anyway, and it is most of the JSON. So is ``guards_code`` (Python source torch
derives from the shape constraints): the loader refuses it, and the runtime checks inputs against the
I/O table's ranges instead. The result is checked by the loader's own checks, so lowering never writes a
program the runtime would refuse.
"""

from __future__ import annotations

import json

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind

from et_tensorrt.errors import EngineBuildError, ProgramRefusedError
from et_tensorrt.format.blob import Weight

from .loader import checked_program

_KINDS = {InputKind.PARAMETER: "parameter", InputKind.BUFFER: "buffer", InputKind.CONSTANT_TENSOR: "constant"}


def program_weights(ep: ExportedProgram) -> list[Weight]:
    """Every tensor the program lifts as an input (parameters, buffers, constants), named by its target."""
    weights = []
    for spec in ep.graph_signature.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            continue
        if spec.kind not in _KINDS:
            raise EngineBuildError(
                f"the partition lifts {spec.target!r} as {spec.kind.name}, which the blob format "
                "cannot carry without pickling (custom objects and tokens are refused)"
            )
        tensor = ep.state_dict.get(spec.target, ep.constants.get(spec.target))
        if not isinstance(tensor, torch.Tensor) or type(tensor.data) is not torch.Tensor:
            raise EngineBuildError(
                f"the partition's {_KINDS[spec.kind]} {spec.target!r} is a "
                f"{type(tensor).__name__}, not a plain tensor; the blob format stores raw tensors only"
            )
        weights.append(Weight(spec.target, _KINDS[spec.kind], tensor, spec.persistent is not False))
    return weights


def check_graph(graph: bytes) -> None:
    """Raises EngineBuildError when the runtime's safe loader would refuse this GRAPH payload."""
    try:
        checked_program(graph)
    except ProgramRefusedError as e:
        raise EngineBuildError(f"the partition's program would be refused by the runtime's safe loader: {e}") from e


def serialize_program(ep: ExportedProgram, *, check: bool = True) -> tuple[bytes, list[Weight]]:
    """(GRAPH payload, WEIGHTS entries) of an aten ExportedProgram. ``check=False`` leaves the loader's checks
    to the caller (:func:`check_graph`): the build cache skips them for a GRAPH it has seen pass."""
    from torch._export.serde.serialize import serialize

    artifact = serialize(ep, serialize_state_dict=False, serialize_constants=False, serialize_example_inputs=False)
    doc = json.loads(artifact.exported_program)
    for node in doc["graph_module"]["graph"]["nodes"]:
        node["metadata"] = {}
    doc["guards_code"] = []
    graph = json.dumps(doc, separators=(",", ":"), sort_keys=True).encode("utf-8")
    if check:
        check_graph(graph)
    return graph, program_weights(ep)
