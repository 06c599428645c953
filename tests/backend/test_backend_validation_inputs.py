"""validate=True feeds each partition random inputs it accepts: indices inside the dim they index,
other integers nonzero and of both signs; a partition PyTorch cannot run on them is reported, not refused."""

import logging

import torch

import et_tensorrt
import et_tensorrt.inspection
from et_tensorrt.parity import ASSERT_CLOSE_FP32
from et_tensorrt.testing import Tester


class FloorDivide(torch.nn.Module):
    def forward(self, x, y):
        return (torch.floor_divide(x, y),)  # floor, not truncation: -7 // 2 == -4


class IndexSelect(torch.nn.Module):
    def forward(self, x, index):
        return (torch.index_select(x, 1, index) * 2,)


class ShiftedIndex(torch.nn.Module):
    def forward(self, x, index):
        return torch.index_select(x * 2, 1, index + 5)  # in range only for the caller's own indices


def _lower_validated(model, args):
    tester = Tester(model, args).lower(min_block_size=1, validate=True).check_delegated_all()
    tester.run_runner().check_parity(tolerances=ASSERT_CLOSE_FP32)


def test_integer_division_is_validated_with_nonzero_divisors_of_both_signs():
    _lower_validated(FloorDivide(), (torch.tensor([[-7, 7, 5]]), torch.tensor([[2, -2, 3]])))


def test_index_inputs_are_validated_inside_the_indexed_dim():
    _lower_validated(IndexSelect(), (torch.randn(5, 3), torch.tensor([0, 2])))


def test_a_partition_pytorch_cannot_run_on_random_inputs_is_reported_and_still_built(caplog, fresh_engine_cache):
    # an empty cache: the warning is the validation's, which a hit skips
    args = (torch.randn(5, 8), torch.tensor([-5, -3]))
    with caplog.at_level(logging.WARNING, logger="et_tensorrt"):
        pte = et_tensorrt.lower(ShiftedIndex(), args, min_block_size=1, validate=True)
    assert any(
        "ONNX not validated" in r.getMessage() and "PyTorch cannot run" in r.getMessage() for r in caplog.records
    ), [r.getMessage() for r in caplog.records]
    torch.testing.assert_close(et_tensorrt.Runner(pte).run(list(args))[0], ShiftedIndex()(*args))


def test_only_the_indices_of_index_put_are_bounded_not_its_values():
    from et_tensorrt.backend.validation import _index_bound

    class IndexPut(torch.nn.Module):
        def forward(self, x, index, values):
            return torch.ops.aten.index_put.default(x, [index], values)

    args = (torch.zeros(6, 3, dtype=torch.int64), torch.tensor([0, 2]), torch.ones(2, 3, dtype=torch.int64))
    ep = torch.export.export(IndexPut(), args)
    _, index, values = (n for n in ep.graph.nodes if n.op == "placeholder")
    assert _index_bound(index) == 6
    assert _index_bound(values) is None  # before: bounded to 1, every value 0


class EmbeddingThroughView(torch.nn.Module):
    """GPT-2's input_ids.view(-1, n) feeding the token embedding: the ids are indices two ops away."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(50, 8)

    def forward(self, ids):
        return self.embed(ids.view(-1, ids.shape[-1])) * 2


def test_an_embedding_fed_through_a_view_is_validated_with_ids_in_range(caplog):
    args = (torch.randint(0, 50, (2, 6)),)
    with caplog.at_level(logging.WARNING, logger="et_tensorrt"):
        pte = et_tensorrt.lower(EmbeddingThroughView().eval(), args, min_block_size=1, validate=True)
    assert not [r.getMessage() for r in caplog.records if "not validated" in r.getMessage()]
    (blob,) = [d.blob for d in et_tensorrt.inspection.inspect_bytes(pte).method("forward").delegates if d.ours]
    assert "validation_inconclusive" not in blob.metadata
    assert list(blob.metadata["validation_max_abs_error"].values()) == [0.0]


class InfinityMask(torch.nn.Module):
    """An additive attention mask: -inf where masked, and scores that stay -inf."""

    def forward(self, scores, keep):
        mask = torch.zeros_like(scores).masked_fill(~keep, float("-inf"))
        return scores + mask, torch.softmax(scores + mask, dim=-1)


def test_infinite_outputs_record_a_finite_error():
    keep = torch.rand(2, 5, 5) > 0.3
    keep[..., 0] = True  # every softmax row keeps one score
    args = (torch.randn(2, 5, 5), keep)
    pte = et_tensorrt.lower(InfinityMask(), args, min_block_size=1, validate=True)
    (blob,) = [d.blob for d in et_tensorrt.inspection.inspect_bytes(pte).method("forward").delegates if d.ours]
    errors = blob.metadata["validation_max_abs_error"]
    assert len(errors) == 2 and all(0.0 <= e < 1e-5 for e in errors.values()), errors  # -inf - -inf is not NaN
