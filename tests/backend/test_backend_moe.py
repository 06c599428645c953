"""Mixture-of-experts decoders of HF transformers (Qwen3-MoE, Mixtral, OLMoE; tiny random configs), with
transformers' default experts code and with ``experts_implementation="batched_mm"``: ``export_causal_lm``'s
``prefill`` (a dynamic number of tokens) and ``decode`` lower to one engine each, routing and experts included
(the engines' ONNX checked by onnxruntime, built by TensorRT), and decode 16 tokens like eager.

``batched_mm`` is one function of transformers (``integrations/moe.py``) for every family, so one family runs it
here (each lowering takes most of a minute); the families differ in their routers and attention, which the
default code's runs cover. One decoder layer each: a second repeats the first's ops and adds about a fifth to each
lowering; docs/models.md's recipe, lowered and run by tests/cli/test_doc_recipes.py, has two."""

from __future__ import annotations

import pytest

import et_tensorrt
from et_tensorrt.inspection import inspect_bytes
from et_tensorrt.testing import decoders, moe_models
from et_tensorrt.testing.decoders import PREFILL_DECODE

pytest.importorskip("transformers")

TOKENS = [3, 5, 7, 11, 13, 2, 9, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28]
PROMPT = 4
TOLERANCE = 1e-4  # fp32 against eager fp32
MAX_SEQ_LEN = 24
# in the engine besides the router's: transformers' default sorts the routed rows by expert and counts them
# (histc, rewritten) into offsets; batched_mm gathers each row's expert weights for one bmm
ENGINE_OPS = {None: {"aten.sort.default", "aten.cumsum.default"}, "batched_mm": {"aten.bmm.default"}}


CASES = [(family, None) for family in moe_models.FAMILIES] + [("qwen3_moe", "batched_mm")]


@pytest.fixture(scope="module", params=CASES, ids=lambda case: f"{case[0]}-{case[1] or 'default'}")
def lowered(request):
    family, experts = request.param
    decoder, lm = decoders.hf_causal_lm(moe_models.hf_moe(family, experts, layers=1), MAX_SEQ_LEN)
    pte = et_tensorrt.lower(lm.programs, constant_methods=lm.constant_methods, validate=True)
    return experts, decoder, pte, et_tensorrt.lower.last_reports


def test_routing_and_experts_are_one_engine_per_method(lowered):
    experts, _, pte, reports = lowered
    assert sorted(reports) == ["decode", "prefill"]
    for method, report in reports.items():
        assert len(report.partitions) == 1 and not report.host_nodes, (method, report.host_nodes)
        ops = {d.op for d in report.nodes}
        assert {"aten.topk.default", "aten._softmax.default"} | ENGINE_OPS[experts] <= ops, sorted(ops)
    delegates = [d.blob for m in inspect_bytes(pte).methods if m.name in PREFILL_DECODE for d in m.delegates]
    assert len(delegates) == 2
    built = [b for b in delegates if "engine_shared_with" not in b.metadata]  # the others run one of these
    assert built and all("validation_max_abs_error" in b.metadata for b in built)  # onnxruntime checked its ONNX


def test_prefill_and_decode_match_eager(lowered):
    _, decoder, pte, _ = lowered
    steps = decoders.decode(decoder, pte, TOKENS, prompt=PROMPT, methods=PREFILL_DECODE)
    assert steps[0].tokens == PROMPT and len(steps) == 1 + 16
    assert max(s.max_error for s in steps) <= TOLERANCE, [s.max_error for s in steps]
    for step in steps[1:]:  # the KV cache stays in the delegate: logits and the token's inputs move
        caches = [s for p in step.plans for s in p.states if "cache" in s.name]
        assert caches and all(s.update == "in place" and s.bytes == 0 for s in caches)
