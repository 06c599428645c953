"""The sampling head's parts without lowering (et_tensorrt.llm.sampling): the draw is its integer specification on
any input, roughly uniform; the head's choice is the reference sampler's; the choices are checked where they are
made. Lowered and decoded: tests/cli/test_cli_generate_sampling.py."""

from __future__ import annotations

import pytest
import torch

from et_tensorrt.llm.export.sampling_head import SampledLM
from et_tensorrt.llm.sampling import PRIME, Sampling, choice_inputs, choose, draw, draw_value
from et_tensorrt.testing.reference_sampler import reference_token


@pytest.mark.parametrize("seed", [0, 1, -3, PRIME, PRIME - 1, 2**62 + 5, -(2**63), 2**63 - 1, 123_456_789_012], ids=str)
def test_draw_is_its_integer_specification(seed):
    counters = torch.tensor([0, 1, 2, 17, PRIME, 2**40, -5, 2**63 - 1])
    got = [float(draw(torch.tensor([seed]), c.reshape(1))) for c in counters]
    assert got == [draw_value(seed, int(c)) for c in counters]
    assert all(0 <= u < 1 for u in got)


def test_draws_are_spread_evenly_and_differ_by_seed():
    values = torch.tensor([draw_value(7, c) for c in range(20_000)])
    counts = torch.histc(values, bins=20, min=0, max=1)
    assert counts.min() > 850 and counts.max() < 1150  # 1,000 expected per bin
    assert len(set(values.tolist())) > 19_900
    assert [draw_value(8, c) for c in range(5)] != values[:5].tolist()


@pytest.mark.parametrize(
    "sampling",
    [Sampling(), Sampling(0.8, 50, 0.9), Sampling(1.0, 0, 1.0), Sampling(0.5, 3, 0.5), Sampling(2.0, 1000, 0.99)],
    ids=str,
)
def test_choice_is_the_reference_samplers(sampling):
    generator = torch.Generator().manual_seed(0)
    for counter in range(40):
        logits = torch.randn(1, 3, 1500, generator=generator) * 4
        token = choose(logits, sampling, torch.tensor([11]), torch.tensor([counter]))
        assert token.shape == (1, 1) and token.dtype == torch.int64
        assert int(token) == reference_token(logits, sampling, 11, counter)


def test_top_k_and_top_p_cut_the_candidates():
    logits = torch.tensor([[4.0, 3.0, 2.0, 1.0, 0.0]])
    picked = {int(choose(logits, Sampling(1.0, 2, 1.0), torch.tensor([1]), torch.tensor([c]))) for c in range(200)}
    assert picked == {0, 1}
    # softmax(4, 3, 2, 1, 0): 0.64, 0.24, ...: top-p 0.6 keeps the first alone (the mass before the second is 0.64)
    assert {int(choose(logits, Sampling(1.0, 5, 0.6), torch.tensor([1]), torch.tensor([c]))) for c in range(50)} == {0}


class _Step(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(40, 8)
        self.out = torch.nn.Linear(8, 40)

    def forward(self, tokens, positions):
        return self.out(self.embed(tokens) + positions.reshape(1, -1, 1))


def test_head_returns_the_token_where_the_next_call_reads_it():
    step = _Step()
    head = SampledLM(step, Sampling(0.8, 10, 0.9, logits=True))
    args = (torch.tensor([[3, 4]]), torch.tensor([0, 1]), torch.tensor([5]), torch.tensor([2]))
    program = torch.export.export(head, (*args, *choice_inputs(head.sampling)), strict=False)
    token, logits = program.module()(*args, *choice_inputs(head.sampling))
    assert token.shape == (1, 1) and torch.equal(logits, step(*args[:2]))
    assert int(token) == reference_token(logits, head.sampling, 5, 2)


@pytest.mark.parametrize(
    "request_",
    [Sampling(), Sampling(0.5, 10, 0.9), Sampling(0.8, 3, 0.5), Sampling(1.5, 10, 1.0), Sampling(0.8, 1)],
    ids=str,
)
def test_one_exported_head_serves_every_request_up_to_its_top_k(request_):
    """The choices are the program's inputs: one export (top-k 10) samples as each request asks, greedy exactly the
    argmax, a smaller top-k masked after the head's TopK of 10."""
    step = _Step()
    exported = Sampling(0.8, 10, 0.9, logits=True)
    example = (torch.tensor([[3, 4]]), torch.tensor([0, 1]), torch.tensor([0]), torch.tensor([0]))
    program = torch.export.export(SampledLM(step, exported), (*example, *choice_inputs(exported)), strict=False)
    with torch.no_grad():
        for counter in range(30):
            tokens, positions = torch.tensor([[counter % 40, 7]]), torch.tensor([counter, counter + 1])
            token, logits = program.module()(
                tokens, positions, torch.tensor([9]), torch.tensor([counter]), *choice_inputs(request_)
            )
            assert int(token) == reference_token(logits, request_, 9, counter), counter
            if request_.greedy:
                assert int(token) == int(logits[0, -1].argmax())


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"temperature": -1}, "temperature is a finite number >= 0"),
        ({"temperature": float("nan")}, "temperature is a finite number >= 0"),
        ({"top_k": 5000}, r"top_k is an integer in 0 \.\. 3840"),
        ({"top_k": 2.5}, "top_k is an integer"),
        ({"top_p": 0}, r"top_p is a number in \(0, 1\]"),
        ({"top_p": 1.5}, r"top_p is a number in \(0, 1\]"),
    ],
)
def test_bad_choices_are_refused_with_their_range(fields, message):
    with pytest.raises(ValueError, match=message):
        Sampling(**fields)


def test_export_refuses_a_whole_vocabulary_above_topk_and_unknown_values():
    from et_tensorrt.llm import export_causal_lm

    with pytest.raises(ValueError, match="TensorRT's TopK takes at most 3840: give top_k <= 3840"):
        Sampling(0.8, 0).check_vocabulary(128_256)
    Sampling(0.8, 50).check_vocabulary(128_256)
    Sampling().check_vocabulary(128_256)  # greedy ranks nothing
    with pytest.raises(ValueError, match="sampling is None, 'greedy', a Sampling or a dict"):
        export_causal_lm(torch.nn.Linear(2, 2), sampling="nucleus", bos_id=0, eos_ids=[1])


class _FakeRunner:
    """Stands in for Runner where the program runs on another device (``meta``: no GPU needed): returns the outputs
    the caller gave (as a program left unplanned writes them in place), else tensors of its own."""

    def __init__(self, in_place: bool):
        from types import SimpleNamespace

        self.in_place, self.calls = in_place, []
        self.last_plan = SimpleNamespace(execution_device=torch.device("meta"))

    def run(self, inputs, method, outputs=None):
        self.calls.append((method, list(inputs), outputs))
        given = list(outputs or [])
        results = given + [
            torch.zeros((1, 1), dtype=torch.int64, device="meta"), torch.zeros((1, 9), device="meta")
        ][len(given) :]  # fmt: skip
        self.outputs_written_in_place = [self.in_place and i < len(given) for i in range(2)]
        return results


def test_the_loop_feeds_each_token_back_where_the_program_wrote_it():
    from et_tensorrt.llm.runner.token_loop import Signature, TokenLoop

    head = Sampling(0.8, 10, 0.9, logits=True)
    runner = _FakeRunner(in_place=True)
    loop = TokenLoop(runner, Signature(head=head), head, seed=3)
    token = loop.first([5, 6, 7], 0)
    for position in range(3, 7):
        token = loop.next(token, position)
    (_, first, no_outputs), *decodes = runner.calls
    assert no_outputs is None and first[0].tolist() == [[5, 6, 7]] and first[1].tolist() == [0, 1, 2]
    assert [int(c[1][3]) for c in [runner.calls[0], *decodes]] == [3, 4, 5, 6, 7]  # the counter: the new position
    for (_, inputs, outputs), (_, following, _) in zip(decodes, decodes[1:]):
        assert following[0] is outputs[0]  # the token the call wrote is the next call's tokens, as it is
        assert outputs[0] is not inputs[0]  # never written where the call reads
    assert [len(c[2]) for c in decodes] == [1, 2, 2, 2]  # after one decode call the logits stay there too
    assert decodes[1][2][1] is decodes[3][2][1]
    # a program whose outputs ExecuTorch planned on the host writes the token there: the loop keeps it there
    runner = _FakeRunner(in_place=False)
    loop = TokenLoop(runner, Signature(head=head), head)
    token = loop.next(loop.first([5], 0), 1)
    loop.next(token, 2)
    assert runner.calls[1][2] is not None and runner.calls[2][2] is None and loop.device == torch.device("cpu")


def test_a_request_takes_the_programs_choices_as_defaults_and_its_top_k_as_the_bound():
    from et_tensorrt.errors import RunnerError
    from et_tensorrt.llm.runner.program_facts import _sampling
    from et_tensorrt.llm.runner.token_loop import Signature

    program = Signature(head=Sampling(0.8, 50, 0.9), ranks=50, vocab=320)
    assert _sampling(program, None, None, None) == Sampling(0.8, 50, 0.9)
    assert _sampling(program, 0, None, None).greedy  # greedy from the sampled program
    assert _sampling(program, 0.5, 5, 0.5) == Sampling(0.5, 5, 0.5)
    assert _sampling(program, 0, 999, None).greedy  # greedy ranks nothing: its top-k is not the head's
    with pytest.raises(RunnerError, match=r"top_k=51: this program's sampling head ranks the 50 likeliest tokens"):
        _sampling(program, None, 51, None)
    with pytest.raises(RunnerError, match=r"top_k=0 \(the whole vocabulary of 320 tokens\).* top_k 1 \.\. 50"):
        _sampling(program, 1.0, 0, None)
    whole = Signature(head=Sampling(0.8, 0), ranks=320, vocab=320)
    assert _sampling(whole, None, 0, None).top_k == 0 and _sampling(whole, None, 320, None).top_k == 320
    fixed = Signature(head=Sampling(0.8, 50, 0.9), choices=False)  # a program made before the choices were inputs
    with pytest.raises(RunnerError, match=r"chosen at export\): it cannot sample with temperature=0.5"):
        _sampling(fixed, 0.5, None, None)


def test_the_loop_hands_the_request_to_the_program_in_56_bytes_a_step():
    from et_tensorrt.llm.runner.token_loop import Signature, TokenLoop

    runner = _FakeRunner(in_place=True)
    request = Sampling(0.5, 7, 0.8)
    loop = TokenLoop(runner, Signature(head=Sampling(0.8, 50, 0.9)), request, seed=3)
    loop.next(loop.first([5], 0), 1)
    inputs = runner.calls[-1][1]
    assert [float(t) for t in inputs[4::2]] == [0.5, pytest.approx(0.8)] and int(inputs[5]) == 7
    assert [(t.dtype, tuple(t.shape)) for t in inputs[2:]] == [(torch.int64, (1,))] * 2 + [
        (torch.float32, (1,)), (torch.int64, (1,)), (torch.float32, (1,))
    ]  # fmt: skip
    assert sum(t.numel() * t.element_size() for t in inputs) + 8 == 56  # and the token out
