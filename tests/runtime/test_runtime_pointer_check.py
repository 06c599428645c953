"""The delegate's per-argument driver cross-check, as the GPU check calls it (`_C._check_argument`).

Without a CUDA driver in the process (CPU torch never loads libcuda) the driver has no answer: every
label is kept as given. On a GPU, scripts/gpu_check/checks.py checks the refusal of a host pointer
labelled cuda and the correction of a device pointer labelled cpu."""

from __future__ import annotations

import pytest
import torch

from et_tensorrt import _C, describe


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CUDA driver answers on a GPU machine")
def test_without_a_driver_the_residence_is_unknown_and_labels_are_kept():
    x = torch.zeros(4, 8)
    assert _C._pointer_residence(x.data_ptr()) == "unknown"
    assert _C._pointer_residence(0) == "unknown"
    device, note = _C._check_argument(describe(x))
    assert str(device) == "cpu" and note == ""
    device, note = _C._check_argument(_C._relabel(describe(x), torch.device("cuda", 0)))
    assert str(device) == "cuda:0" and note == ""
