"""Tiny mixture-of-experts causal LMs of HF transformers, random weights (nothing is downloaded): 2 layers, 4
experts (2 per token), hidden size 32, 4 attention heads (2 for K/V).

``experts``: transformers' ``experts_implementation``. None is its default, ``grouped_mm``: the routed rows sorted
by expert, ``histc`` + ``cumsum`` offsets, a grouped matmul (``transformers::grouped_mm_fallback`` for float32
weights, ``aten._grouped_mm`` for bfloat16 ones). ``"batched_mm"`` gathers each routed row's expert weights for one
``bmm``. (``"eager"``, a loop over the experts each token picked, has data-dependent shapes.)
"""

from __future__ import annotations

import torch

FAMILIES = ("qwen3_moe", "mixtral", "olmoe")
EXPERTS = 4
PER_TOKEN = 2


def hf_moe(family: str, experts: str | None = None, layers: int = 2, vocab: int = 128):
    import transformers

    common = dict(
        vocab_size=vocab, hidden_size=32, num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=64, bos_token_id=0, eos_token_id=1, num_experts_per_tok=PER_TOKEN,
    )  # fmt: skip
    if experts is not None:
        common["experts_implementation"] = experts
    if family == "qwen3_moe":
        config = transformers.Qwen3MoeConfig(
            intermediate_size=64, moe_intermediate_size=32, num_experts=EXPERTS, head_dim=8, **common
        )
        cls = transformers.Qwen3MoeForCausalLM
    elif family == "mixtral":
        config = transformers.MixtralConfig(intermediate_size=32, num_local_experts=EXPERTS, **common)
        cls = transformers.MixtralForCausalLM
    elif family == "olmoe":
        config = transformers.OlmoeConfig(intermediate_size=32, num_experts=EXPERTS, **common)
        cls = transformers.OlmoeForCausalLM
    else:
        raise ValueError(f"family is one of {', '.join(FAMILIES)}, not {family!r}")
    torch.manual_seed(0)
    return cls(config).eval().requires_grad_(False)
