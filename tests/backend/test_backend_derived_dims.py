"""Inputs whose dynamic dims are derived (``Dim("h") * 16``, as vision models declare them) lower: the engine
profile is the derived range, and the program runs at other sizes of that form."""

import warnings

import pytest
import torch

from et_tensorrt.format import blob as B
from et_tensorrt.parity import ASSERT_CLOSE_FP32, Tolerances
from et_tensorrt.testing import Tester


class ConvPool(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        return torch.nn.functional.max_pool2d(torch.relu(self.conv(x)), 16).flatten(1)


def test_derived_dims_lower_with_their_range_and_run_at_other_sizes():
    height = torch.export.Dim("height", min=1, max=8)
    width = torch.export.Dim("width", min=2, max=4)
    tester = Tester(ConvPool(), (torch.randn(1, 3, 64, 48),), dynamic_shapes=({2: height * 16, 3: width * 16 + 0},))
    tester.lower(min_block_size=1).check_delegated_all()
    for h, w in ((64, 48), (32, 32), (128, 64), (16, 32)):
        tester.run_runner(torch.randn(1, 3, h, w)).check_parity(tolerances=Tolerances(rtol=1e-5, atol=1e-5))


def test_derived_dim_profile_is_the_derived_range():
    height = torch.export.Dim("height", min=1, max=8)
    tester = Tester(ConvPool(), (torch.randn(1, 3, 64, 32),), dynamic_shapes=({2: height * 16},), min_block_size=1)
    [(blob, _)] = tester.export().to_edge_transform_and_lower().lowered_blobs()
    ep = tester.exported_program
    # the declared range, times 16: torch.export narrows the symbol to [2, 8] but records 16*h in [16, 128]
    x = next(n for n in ep.graph.nodes if n.op == "placeholder" and n.name == "x")
    [symbol] = x.meta["val"].shape[2].node.expr.free_symbols
    assert int(ep.range_constraints[symbol].lower) == 2
    assert blob.inputs[0].dims[2] == B.DimRange(16, 64, 128)
    assert blob.inputs[0].dims[3] == B.DimRange.static(32)


class StridedThenScaled(torch.nn.Module):
    def forward(self, x):
        every_eighth = x[:, ::8]  # size (s + 7) // 8: kept on the host below
        return torch.relu(every_eighth) * 2 + 1


def test_an_engine_fed_a_computed_size_gets_its_range_and_runs():
    seq = torch.export.Dim("seq", min=9, max=100)  # export: (s + 7) // 8 >= 2
    tester = Tester(StridedThenScaled(), (torch.randn(2, 40),), dynamic_shapes=({1: seq},))
    tester.lower(min_block_size=1, torch_executed_ops=["aten.slice_copy.Tensor", "aten.slice.Tensor"])
    tester.check_host_nodes(["aten_slice_copy_tensor"])
    for n in (9, 17, 40, 100):
        tester.run_runner(torch.randn(2, n)).check_parity(tolerances=ASSERT_CLOSE_FP32)


class Frames(torch.nn.Module):
    """Audio read in frames of 20 samples, as Wav2Vec2's feature extractor does: its length a multiple of 20."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv1d(1, 4, kernel_size=20, stride=20)

    def forward(self, x):
        return torch.relu(self.conv(x.unsqueeze(1)))


def _lowered_frames(dim):
    torch.manual_seed(0)
    program = torch.export.export(Frames().eval(), (torch.randn(1, 8000),), dynamic_shapes={"x": {1: dim}})
    return _lowered_frames_program(program)


def _lowered_frames_program(program):
    """A Runner of ``program`` lowered, and the DynamicRangeWarnings the lowering gave."""
    import et_tensorrt
    from et_tensorrt.errors import DynamicRangeWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runner = et_tensorrt.Runner(et_tensorrt.lower(program, min_block_size=1))
    return runner, [str(w.message) for w in caught if issubclass(w.category, DynamicRangeWarning)]


@pytest.mark.parametrize(
    "dim",
    [20 * torch.export.Dim("_samples", min=200, max=1600), torch.export.Dim("samples", min=4000, max=32000)],
    ids=["derived", "direct"],
)
def test_a_declared_range_is_the_lowered_programs_range(dim):
    """Issue 54 row 1: up to 32,000 samples declared and traced at 8,000, a stride-20 Conv1d's program took at most
    20,480 (torch's fake convolution guarded oneDNN's ``numel > 20480`` kernel choice at the example's size): the
    lowered program takes the whole declared range, without a word, and its ends run."""
    from et_tensorrt.errors import InputShapeError

    runner, said = _lowered_frames(dim)
    assert said == []
    for samples in (4000, 20480 + 20, 32000):
        assert runner.run([torch.randn(1, samples)])[0].shape == (1, 4, samples // 20)
    with pytest.raises(InputShapeError, match=r"takes at most \(1, 32000\)"):
        runner.run([torch.randn(1, 32020)])


def test_a_dim_planned_below_its_declared_range_is_said_with_the_range_kept():
    """Where a method input is planned below its declared maximum (any stage's narrowing), the lowering names the
    dim, the declared range and the range kept: here a lowered program planned to 32,000 samples, said against a
    declared maximum of 40,000."""
    from et_tensorrt import lowering
    from et_tensorrt.errors import DynamicRangeWarning

    torch.manual_seed(0)
    dim = torch.export.Dim("samples", min=4000, max=32000)
    program = torch.export.export(Frames().eval(), (torch.randn(1, 8000),), dynamic_shapes={"x": {1: dim}})
    manager = lowering.lower_program(program, min_block_size=1)
    with pytest.warns(DynamicRangeWarning, match=r"x dim 1: declared 4000\.\.40000, kept 4000\.\.32000\. Larger"):
        lowering._warn_narrowed({"forward": [(0, "x", 1, 4000, 40000)]}, manager)


@pytest.mark.slow
def test_wav2vec2_with_a_derived_length_takes_its_declared_range():
    """The model issue 54 row 1 was found with: HF Wav2Vec2 CTC (a tiny random config) exported with
    ``20 * Dim("_samples", min=200, max=1600)`` (to 32,000 samples, traced at 8,000): its program takes the whole
    declared range, without a word."""
    from transformers import Wav2Vec2Config, Wav2Vec2ForCTC

    from et_tensorrt.errors import InputShapeError

    torch.manual_seed(0)
    config = Wav2Vec2Config(
        vocab_size=32, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
        conv_dim=(16,) * 7, num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2,
    )  # fmt: skip
    model = Wav2Vec2ForCTC(config).eval()
    samples = 20 * torch.export.Dim("_samples", min=200, max=1600)
    program = torch.export.export(model, (torch.randn(1, 8000),), dynamic_shapes=({1: samples},))
    runner, said = _lowered_frames_program(program)
    assert said == []
    logits = runner.run([torch.randn(1, 32000)])[0]
    assert logits.shape[0] == 1 and logits.shape[-1] == 32
    with pytest.raises(InputShapeError, match=r"takes at most \(1, 32000\)"):
        runner.run([torch.randn(1, 32020)])
