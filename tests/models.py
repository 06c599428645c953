"""Models shared by several test folders (each test file keeps the models only it uses).

The runtime tests lower MLP, ConvNet and DynamicHead once per session (tests/runtime/conftest.py); the
partition tests export HostBranch on fake cuda tensors; the security tests lower MLP.
"""

from __future__ import annotations

import torch

DYNAMIC_BATCH = (2, 16)  # DynamicHead's batch range: what it is exported (and profiled) for


class MLP(torch.nn.Module):
    """Linear(8, 16) -> ReLU -> Linear(16, 4) (other widths for tests that need more weight bytes)."""

    def __init__(self, inputs: int = 8, hidden: int = 16, outputs: int = 4):
        super().__init__()
        self.fc1 = torch.nn.Linear(inputs, hidden)
        self.fc2 = torch.nn.Linear(hidden, outputs)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class ConvNet(torch.nn.Module):
    """Conv -> BatchNorm -> ReLU -> strided conv, for (N, 3, H, W) inputs."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 4, 3, stride=2)

    def forward(self, x):
        return self.conv2(torch.relu(self.bn(self.conv1(x))))


class DynamicHead(torch.nn.Module):
    """Linear(8, 4) -> tanh -> * 0.5 (exported with a dynamic batch in DYNAMIC_BATCH)."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x):
        return torch.tanh(self.fc(x)) * 0.5


class HostBranch(torch.nn.Module):
    """The seed model (../shared/seeds: the Torch-TensorRT bug).

    ``.to(device="cpu", dtype=...)`` moves a branch to the host, which then keeps working there with standard
    ops (arange, cat) in place of the seed's custom ops. Inputs are fake cuda tensors (:func:`seed_inputs`).
    """

    def forward(self, x):
        counts = (x * 2.0).to(device="cpu", dtype=torch.int32)
        index = torch.arange(0, counts.shape[0], dtype=torch.int32)
        return torch.cat([counts, index])


def seed_inputs():
    return (torch.empty(16, device="cuda"),)
