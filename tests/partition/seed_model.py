"""The seed model (../shared/seeds: the Torch-TensorRT bug), shared by the partition tests.

`.to(device="cpu", dtype=...)` moves a branch to the host, which then keeps working there with
standard ops (arange, cat) in place of the seed's custom ops. Inputs are fake cuda tensors.
"""

import torch


class HostBranch(torch.nn.Module):
    def forward(self, x):
        counts = (x * 2.0).to(device="cpu", dtype=torch.int32)
        index = torch.arange(0, counts.shape[0], dtype=torch.int32)
        return torch.cat([counts, index])


def seed_inputs():
    return (torch.empty(16, device="cuda"),)
