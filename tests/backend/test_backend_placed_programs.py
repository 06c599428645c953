"""A program exported with CUDA tensors lowers: its partitions are exported to ONNX, validated and embedded
from their host form (ONNX carries no device), while the blob records the devices the program recorded.

On this CPU machine the program is exported under FakeTensorMode with device="cuda" (what a GPU machine
records), and the real weights of the same model are put into the edge program before the backend sees
it: exactly the mix that broke the ONNX export (cuda in the graph, host example inputs and weights)."""

from __future__ import annotations

import warnings

import torch
from executorch.exir import to_edge
from executorch.exir.lowered_backend_module import get_lowered_submodules
from torch._subclasses.fake_tensor import FakeTensorMode

import et_tensorrt
from et_tensorrt import compile_specs as cs
from et_tensorrt.embedded_program import load_program
from et_tensorrt.format import blob as B


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x))).mean((2, 3))
        return self.fc(y) + torch.arange(4, device=x.device)  # a factory on the recorded device


def _export_on_cuda(model: torch.nn.Module, shape) -> torch.export.ExportedProgram:
    """``model``'s structure exported with fake CUDA parameters and input (CPU torch cannot make real ones)."""
    with torch.no_grad(), FakeTensorMode(allow_non_fake_inputs=True):
        for module in model.modules():
            for name, p in list(module._parameters.items()):
                module._parameters[name] = torch.nn.Parameter(
                    torch.empty(p.shape, dtype=p.dtype, device="cuda"), requires_grad=False
                )
            for name, b in list(module._buffers.items()):
                module._buffers[name] = torch.empty(b.shape, dtype=b.dtype, device="cuda")
        return torch.export.export(model, (torch.empty(shape, device="cuda"),))


def test_a_program_exported_on_cuda_lowers_with_its_real_weights():
    torch.manual_seed(0)
    real = Net().eval()
    real.bn.running_mean.uniform_(-1, 1)
    real.bn.running_var.uniform_(0.5, 2)
    ep = _export_on_cuda(Net().eval(), (2, 3, 8, 8))
    assert {str(n.meta["val"].device) for n in ep.graph.nodes if n.op == "placeholder"} == {"cuda:0"}

    edge = to_edge(ep)  # decomposes with the recorded (fake) tensors
    program = edge.exported_program()
    fake_weights = dict(program.state_dict)
    weights = real.state_dict()
    for name in program.state_dict:
        program.state_dict[name] = (
            torch.nn.Parameter(weights[name].clone(), requires_grad=False)
            if isinstance(program.state_dict[name], torch.nn.Parameter)
            else weights[name].clone()
        )

    partitioner = et_tensorrt.TensorRTPartitioner(min_block_size=1, compile_specs={cs.VALIDATE: True})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        edge = edge.to_backend(partitioner)  # preprocess: ONNX export, onnxruntime check, engine build
    assert partitioner.report.placed and partitioner.report.host_nodes == {}
    (lowered,) = [lm for _, lm, _ in get_lowered_submodules(edge.exported_program().graph_module)]
    blob = B.read_blob(lowered.processed_bytes)
    assert blob.engine, blob.metadata.get("fallback_reason")
    assert set(blob.metadata["validation_max_abs_error"]) == {e.name for e in blob.outputs}
    assert [e.device for e in blob.io] == ["cuda:0", "cuda:0"], "the I/O table keeps the recorded devices"
    embedded = load_program(blob)
    assert all(t.device.type == "cpu" for t in embedded.state_dict.values()), "embedded program: host form"

    # to_executorch re-traces the delegate call with the graph's fake cuda input: give the lowered module
    # back its fake weights (a GPU machine's program has real cuda weights and needs no such step).
    for name in lowered.original_module.state_dict:
        lowered.original_module.state_dict[name] = fake_weights[name]
    pte = edge.to_executorch().buffer
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():  # no GPU: the delegate runs its embedded host program with PyTorch
        torch.testing.assert_close(et_tensorrt.Runner(pte).run([x])[0], real(x))


def test_the_pytorch_fallback_moves_factories_to_its_device():
    """The embedded host form says ``device=cpu``; on a GPU the fallback runs the partition on cuda."""
    from et_tensorrt.runtime.executors import _place_factories

    class Positions(torch.nn.Module):
        def forward(self, x):
            return x + torch.arange(4, dtype=x.dtype, device=x.device)

    module = torch.export.export(Positions(), (torch.randn(4),)).module()
    _place_factories(module, torch.device("cuda", 0))
    devices = [n.kwargs["device"] for n in module.graph.nodes if "device" in n.kwargs]
    assert devices == [torch.device("cuda", 0)]
