"""Input descriptors: torch tensors as ExecuTorch runtime tensors that carry their real device.

The work happens in C++ (`extension/aten_util/`); this module only accepts device strings as well as
`torch.device` objects.
"""

from __future__ import annotations

import torch

from . import _C
from .errors import UnsupportedDeviceError

Device = _C.Device
TensorDescriptor = _C.TensorDescriptor
describe = _C.describe
describe_inputs = _C.describe_inputs


def translate_device(device: torch.device | str) -> Device:
    """The ExecuTorch runtime device for a torch device: cpu -> cpu, cuda:N -> cuda N.

    A bare ``"cuda"`` means the current CUDA device (0 when no CUDA runtime is loaded). Every other
    device type raises :class:`UnsupportedDeviceError`, never a silent "host".
    """
    if isinstance(device, str):
        try:
            device = torch.device(device)
        except RuntimeError as e:
            raise UnsupportedDeviceError(f"{device!r} is not a device torch recognizes: {e}") from None
    if not isinstance(device, torch.device):
        raise TypeError(f"expected a torch.device or str, got {type(device).__name__}")
    return _C.translate_device(device)
