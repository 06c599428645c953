"""Fake-CUDA model builders for the partitioner tests (CPU torch; FakeTensorMode records cuda:0).

On CPU torch ``.to("cuda")`` inside ``forward`` fails even under FakeTensorMode; ``.to(x.device)``
with ``x`` a fake cuda tensor records the same ``_to_copy(device=cuda:0)``.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from executorch.exir import to_edge
from torch._subclasses.fake_tensor import FakeTensorMode

from et_tensorrt.errors import PlacementWarning


def _export(make_model, make_inputs, dynamic_shapes=None):
    with torch.no_grad(), FakeTensorMode():
        model = make_model().eval()  # parameters are created fake, inside the mode
        return torch.export.export(model, make_inputs(), dynamic_shapes=dynamic_shapes)


@pytest.fixture
def fake_export():
    """``fake_export(make_model, make_inputs, dynamic_shapes=None)`` -> torch.export program whose
    tensors live where ``make_inputs`` (called inside FakeTensorMode) put them."""
    return _export


_EDGE_CACHE = {}


@pytest.fixture
def fake_edge():
    """Like ``fake_export``, then ``to_edge``: the edge program the partitioner sees.

    Built once per (model, inputs) for speed; the partitioner clears stale tags on every run and
    ``explain`` changes nothing, so sharing one program between tests is safe.
    """

    def build(make_model, make_inputs, dynamic_shapes=None):
        key = (make_model, make_inputs, repr(dynamic_shapes))
        if key not in _EDGE_CACHE:
            ep = _export(make_model, make_inputs, dynamic_shapes)
            _EDGE_CACHE[key] = to_edge(ep).exported_program()
        return _EDGE_CACHE[key]

    return build


@pytest.fixture
def partition_recording():
    """``partition_recording(partitioner, ep)`` -> (PartitionResult, [warning messages of
    PlacementWarning]), with every warning recorded (no once-per-location filtering)."""

    def run(partitioner, ep):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = partitioner(ep)
        placement = [str(w.message) for w in caught if issubclass(w.category, PlacementWarning)]
        return result, placement

    return run


def tags(ep):
    """Node name -> delegation tag for every tagged node (call nodes and constants)."""
    return {n.name: n.meta["delegation_tag"] for n in ep.graph.nodes if "delegation_tag" in n.meta}


@pytest.fixture
def tagged():
    return tags


def warned_nodes(messages):
    """The node names quoted in PlacementWarning messages."""
    return sorted(m.split("'")[1] for m in messages)


@pytest.fixture
def warned():
    return warned_nodes
