"""The bundled example: a small MLP whose post-processing is a *host branch*.

``forward(x)`` returns ``(logits, totals)``: ``logits`` come from three linear layers (work for a
TensorRT engine); ``totals`` is a running sum of the logits that the model deliberately computes on
the host (``.to("cpu")`` then ``cumsum``), the kind of bookkeeping that feeds host-side code.

Where the host branch shows depends on how the model is exported (the placement rule in
:mod:`et_tensorrt.partition`):

* exported on the host (:func:`export_on_host`, ExecuTorch's usual way, works anywhere) the graph is
  *unplaced*: ``.to("cpu")`` moves nothing, so placement refuses nothing, and every op here is in the
  supported table. The host branch stays on the host because the user keeps it there with
  ``torch_executed_ops`` (:data:`TORCH_EXECUTED_OPS`).
* exported with device tensors (:func:`export_placed`, here with fake cuda tensors so that it needs
  no GPU; analysis only, fake tensors hold no data) the graph is *placed*: the ``.to("cpu")`` and
  everything after it were recorded on the host and stay there, whatever the op table says.
"""

from __future__ import annotations

import torch

IN_FEATURES = 16
HIDDEN = 32
CLASSES = 10
BATCH = 4

# The ops the demo keeps on the host by user choice (table-supported ops: only the option keeps them off).
TORCH_EXECUTED_OPS = ("aten.sigmoid.default", "aten.cumsum.default")


class HostBranchNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(IN_FEATURES, HIDDEN)
        self.fc2 = torch.nn.Linear(HIDDEN, HIDDEN)
        self.fc3 = torch.nn.Linear(HIDDEN, CLASSES)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        h = torch.relu(self.fc2(h))
        logits = self.fc3(h)
        # The host branch: move to the host, then host-side post-processing.
        host = logits.to("cpu")
        totals = torch.cumsum(torch.sigmoid(host), dim=-1)
        return logits, totals


def make_model(seed: int = 0) -> HostBranchNet:
    torch.manual_seed(seed)
    return HostBranchNet().eval()


def example_inputs(seed: int = 1) -> tuple[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(BATCH, IN_FEATURES, generator=g),)


def export_on_host(seed: int = 0) -> torch.export.ExportedProgram:
    """The real program: host tensors (an unplaced graph)."""
    with torch.no_grad():
        return torch.export.export(make_model(seed), example_inputs())


def export_placed() -> torch.export.ExportedProgram:
    """The same model exported with (fake) cuda:0 tensors: a placed graph, for ``explain`` only."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with torch.no_grad(), FakeTensorMode():
        model = HostBranchNet().eval()
        # nn.Module.to("cuda") raises on CPU torch; build fake cuda parameters inside the mode.
        for module in (model.fc1, model.fc2, model.fc3):
            module.weight = torch.nn.Parameter(torch.empty_like(module.weight, device="cuda"), requires_grad=False)
            module.bias = torch.nn.Parameter(torch.empty_like(module.bias, device="cuda"), requires_grad=False)
        x = torch.empty(BATCH, IN_FEATURES, device="cuda")
        return torch.export.export(model, (x,))
