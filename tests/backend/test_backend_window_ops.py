"""The ops of swin's shifted-window attention lower whole, with static and dynamic image sizes: padding to
whole windows (``constant_pad_nd`` whose pads are sizes), ``torch.roll`` (``fmod`` of indices), and the
attention mask built by slice assignment (``slice_scatter`` of ``copy``). Engines are built from ONNX that
onnxruntime checked against PyTorch; the programs run through the delegate and match eager."""

from __future__ import annotations

import torch
from torch.export import Dim

from et_tensorrt.testing import Tester

F = torch.nn.functional
WINDOW, SHIFT = 8, 4


class ShiftedWindows(torch.nn.Module):
    """An image (B, H, W, C) padded to whole windows, rolled by half a window, plus swin's region mask."""

    def forward(self, x):
        _, h, w, _ = x.shape
        x = F.pad(x, (0, 0, 0, (WINDOW - w % WINDOW) % WINDOW, 0, (WINDOW - h % WINDOW) % WINDOW))
        x = torch.roll(x, shifts=(-SHIFT, -SHIFT), dims=(1, 2))
        mask = x.new_zeros(x.shape[1], x.shape[2])
        regions = (slice(0, -WINDOW), slice(-WINDOW, -SHIFT), slice(-SHIFT, None))
        count = 0
        for rows in regions:
            for cols in regions:
                mask[rows, cols] = count  # copy_ of a 0-d value into a slice: slice_scatter(copy)
                count += 1
        return x + mask[None, :, :, None], torch.fmod(x, 0.75)


def _lowers_whole(tester: Tester) -> Tester:
    tester.lower(min_block_size=1, validate=True).check_partitions(1).check_delegated_all()
    tester.check_blobs()  # each partition has an engine
    return tester


def test_shifted_windows_with_a_static_size():
    x = torch.randn(1, 13, 10, 3)
    _lowers_whole(Tester(ShiftedWindows(), (x,))).run_both().check_parity()


def test_shifted_windows_with_dynamic_height_and_width():
    # Sizes 8k+3 and 8j+6: torch.export must prove a mask region is not one row wide, which it cannot for
    # every size (swin's own sizes are multiples of its patch and window sizes).
    x = torch.randn(1, 19, 30, 3)
    dynamic = ({1: Dim("k", min=2, max=6) * 8 + 3, 2: Dim("j", min=2, max=6) * 8 + 6},)
    tester = _lowers_whole(Tester(ShiftedWindows(), (x,), dynamic))
    for h, w in ((19, 30), (51, 22), (35, 54)):  # other pads, other mask shapes
        tester.run_runner([torch.randn(1, h, w, 3)]).check_parity()


def test_copy_broadcasts_its_source_and_casts_it():
    class Fill(torch.nn.Module):
        def forward(self, x, row):
            out = torch.zeros_like(x)
            out[1:3] = row  # (W,) into (2, W): broadcast
            ints = torch.zeros(x.shape, dtype=torch.int32)
            ints[:, ::2] = x[:, ::2]  # float into int32: a cast toward zero
            return out, ints

    args = (torch.randn(4, 6) * 3, torch.randn(6))
    _lowers_whole(Tester(Fill(), args)).run_both().check_parity(exact=True)


def test_pads_that_crop_and_strided_slice_scatter():
    class PadsAndSlices(torch.nn.Module):
        def forward(self, x, src):
            cropped = F.pad(x, (-1, 2, 1, -2), value=0.5)  # negative pads remove, positive add
            scattered = torch.slice_scatter(x, src, dim=1, start=1, end=None, step=2)
            return cropped, scattered

    args = (torch.randn(2, 7, 5), torch.randn(2, 3, 5))
    _lowers_whole(Tester(PadsAndSlices(), args)).run_both().check_parity(exact=True)


def test_global_average_pooling_over_a_dynamic_size():
    """ExecuTorch decomposes it to ``mean`` and an ``as_strided`` that only restrides a 1x1 result: a reshape."""

    class Head(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.pool, self.fc = torch.nn.AdaptiveAvgPool2d(1), torch.nn.Linear(6, 3)

        def forward(self, x):
            return self.fc(torch.flatten(self.pool(x.permute(0, 3, 1, 2)), 1))

    x = torch.randn(2, 12, 10, 6)
    tester = _lowers_whole(Tester(Head(), (x,), ({1: Dim("h", min=2, max=32), 2: Dim("w", min=2, max=32)},)))
    for h, w in ((12, 10), (2, 31), (32, 7)):
        tester.run_runner([torch.randn(2, h, w, 6)]).check_parity()


def test_adaptive_average_pooling_over_a_dynamic_size():
    """alexnet / vgg's ``adaptive_avg_pool2d((6, 6))`` on a dynamic image: windows that overlap and change with
    the size; the averaging matrices are computed in the engine from the input's size."""

    class Pool(torch.nn.Module):
        def forward(self, x):
            return F.adaptive_avg_pool2d(x, (6, 6)), F.adaptive_avg_pool2d(x, (3, 1))

    x = torch.randn(2, 4, 13, 9)
    dynamic = ({2: Dim("h", min=2, max=40), 3: Dim("w", min=2, max=40)},)
    tester = _lowers_whole(Tester(Pool(), (x,), dynamic))
    for h, w in ((13, 9), (2, 40), (6, 6), (37, 5)):  # fewer rows than windows, equal, unequal
        tester.run_runner([torch.randn(2, 4, h, w)]).check_parity()
