"""Stage ``lift_state``: where state is lifted. The partition's mutable buffers (KV caches) become
``State``s, and the engine program takes them as trailing inputs and outputs (the logic is in
backend/state_lifting.py: ``find_states``, ``engine_program``; docs/stateful-decode.md)."""

from __future__ import annotations

from et_tensorrt.backend.stages.job import PartitionJob
from et_tensorrt.backend.state_lifting import engine_program, find_states


def run(job: PartitionJob) -> None:
    job.states = find_states(job.aten_ep)
    job.engine_ep = engine_program(job.aten_ep, job.states)
