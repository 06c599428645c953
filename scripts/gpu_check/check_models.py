"""The GPU check's models and programs, in plain torch (imported on the device machine, where only torch is).

The bundle lowers each program here with `et_tensorrt.lower` and ships its `.pte`, the model's weights, the
inputs and the eager outputs computed here on the CPU in fp32. On the device machine the same classes with
the shipped weights give the eager-CUDA timings, with no ExecuTorch or ONNX there.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn


class Mlp(nn.Module):
    """Three linear layers: one engine, weight-heavy enough that its engine and embedded program are real."""

    def __init__(self, width: int = 256, hidden: int = 384):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(width, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, width)
        )

    def forward(self, x):
        return self.layers(x)


class ConvNet(nn.Module):
    """Convolutions then a classifier head: compute-bound where the MLP is launch-bound."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU()
        )
        self.head = nn.Linear(64, 10)

    def forward(self, x):
        return self.head(self.features(x).mean(dim=(2, 3)))


class HostOpBetween(nn.Module):
    """linear -> tanh -> linear, with tanh kept on the host: two delegates and one ExecuTorch CPU kernel."""

    def __init__(self, width: int = 64):
        super().__init__()
        self.first = nn.Linear(width, width)
        self.second = nn.Linear(width, width)

    def forward(self, x):
        return self.second(torch.tanh(self.first(x)))


MODELS = {"mlp": Mlp, "convnet": ConvNet, "host_op_between": HostOpBetween}

INPUT_SHAPES = {"mlp": [(32, 256)], "convnet": [(8, 3, 64, 64)], "host_op_between": [(16, 64)]}


@dataclass(frozen=True)
class ProgramSpec:
    """One `.pte` of the check: which model, how it is lowered, and what it is there to show."""

    name: str
    model: str
    precision: str = "fp32"
    zero_copy_outputs: bool = True  # outputs left unplanned: the Runner writes them into caller memory
    options: dict = field(default_factory=dict)  # more `et_tensorrt.lower` options
    shows: str = ""


PROGRAMS = (
    ProgramSpec("mlp_fp32", "mlp", shows="engine deserializes; CUDA inputs shared; caller CUDA outputs in place"),
    ProgramSpec(
        "mlp_fp32_planned",
        "mlp",
        zero_copy_outputs=False,
        shows="outputs ExecuTorch planned in host memory: copied device -> host",
    ),
    ProgramSpec("mlp_fp16", "mlp", precision="fp16", shows="fp16 engine within fp16 tolerance"),
    ProgramSpec("convnet_fp32", "convnet", shows="convolutions; latency against eager CUDA"),
    ProgramSpec(
        "host_op_between",
        "host_op_between",
        zero_copy_outputs=False,
        options={"torch_executed_ops": ["aten.tanh.default"]},
        shows="two delegates around an ExecuTorch CPU kernel (loaded without executorch.exir)",
    ),
)

# weights="refit" programs (issue 17) are not in the bundle: the bundle is lowered on the CPU machine, and
# TensorRT-RTX 1.7.1 builds refittable (weight-stripped) engines only with a GPU. checks.refit runs them when a
# bundle carries them (e.g. "mlp_fp32_refit", options={"weights": "refit"}, lowered on a GPU machine).

SEED = 0


def build_model(name: str, state_dict: dict | None = None) -> nn.Module:
    """The model, seeded; with ``state_dict`` its shipped weights instead."""
    torch.manual_seed(SEED)
    model = MODELS[name]().eval()
    if state_dict is not None:
        model.load_state_dict(state_dict)
    return model


def example_inputs(name: str) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(SEED + 1)
    return [torch.randn(shape, generator=generator) for shape in INPUT_SHAPES[name]]
