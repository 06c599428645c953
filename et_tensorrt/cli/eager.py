"""The eager reference ``check`` compares a lowered program with: the exported programs themselves, run by PyTorch as
the lowered program runs them. A buffer a method updates (a KV cache, a recurrent state, HF's
``cumulative_length``) is one tensor per name across the methods (the lowering shares a state by its buffer name,
backend/state_sharing.py), kept from call to call; it starts from the exported contents, and it is a copy: the
programs stay as they were exported, for the lowering to read."""

from __future__ import annotations

import torch
from torch.export.graph_signature import InputKind
from torch.utils import _pytree as pytree


class EagerProgram:
    """``programs``: one ExportedProgram (the method ``forward``) or method name -> ExportedProgram. ``run`` has
    :meth:`et_tensorrt.Runner.run`'s form, so a token loop drives either."""

    def __init__(self, programs):
        self._programs = programs if isinstance(programs, dict) else {"forward": programs}
        self._modules: dict[str, torch.nn.Module] = {}
        # buffer name -> (as exported, the one copy the methods update); a method whose buffer of that name is
        # exported otherwise (another shape or contents: the lowering then does not share it) gets a copy of its own
        self._states: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}

    def _module(self, method: str) -> torch.nn.Module:
        module = self._modules.get(method)
        if module is None:
            program = self._programs[method]
            module = program.module()  # its buffers are the program's own tensors: replaced by copies below
            for spec in program.graph_signature.input_specs:
                if spec.kind != InputKind.BUFFER:
                    continue
                # every buffer, not only those the signature says are updated: a program saved before
                # functionalization updates its buffers in place (HF's static cache), its signature silent
                exported = module.get_buffer(spec.target)
                held = self._states.get(spec.target)
                if held is None or not _alike(held[0], exported):
                    held = self._states[spec.target] = (exported, exported.clone())
                owner, _, leaf = spec.target.rpartition(".")
                module.get_submodule(owner).register_buffer(leaf, held[1], persistent=spec.persistent is not False)
            self._modules[method] = module
        return module

    def run(self, inputs, method: str = "forward", outputs=None) -> list:
        """The method's outputs on its flat ``inputs`` (called as it was exported: positional and keyword
        inputs), flattened as the lowered program returns them; ``outputs`` is ignored (the Runner's form)."""
        module = self._module(method)
        args, kwargs = pytree.tree_unflatten(list(inputs), self._programs[method].call_spec.in_spec)
        with torch.no_grad():
            return pytree.tree_leaves(module(*args, **kwargs))


def _alike(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
