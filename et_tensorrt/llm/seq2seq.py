"""An HF encoder–decoder (T5, BART, Whisper's text side: any whose attention reads an ``EncoderDecoderCache``)
exported as ``encoder`` and ``decoder`` methods of one program, with the cross-attention keys and values computed
once per input.

HF transformers' own ExecuTorch export (``Seq2SeqLMExportableModule``) gives its decoder the encoder's hidden states
and recomputes every layer's cross-attention K and V from them at each token: two projections of the whole input
per layer per token. Here the ``encoder`` method returns them with the hidden states, computed once (it runs the
decoder's first step on the start token and keeps the cross-attention cache that step fills), and the ``decoder``
method takes them as inputs: HF's attention reads a cross-attention cache marked as filled instead of projecting.
On a GPU they stay where the encoder wrote them and the decoder's delegate shares them (no copy); its self-attention
cache is a state the delegate owns, as in HF's export.

    methods = export_encoder_decoder(model, max_cache_len=64, max_input_len=128)
    pte = et_tensorrt.lower(methods)
    hidden, *cross = runner.run([input_ids], method="encoder")
    logits = runner.run([token, hidden, position, *cross], method="decoder")[0]
"""

from __future__ import annotations

import torch

from .._quiet import quiet
from ..errors import OptionError


class _Encoder(torch.nn.Module):
    """input ids -> (hidden states, K_0, V_0, K_1, V_1, ...): the decoder's cross-attention keys and values."""

    def __init__(self, model):
        super().__init__()
        self.encoder, self.decoder = model.get_encoder(), model.get_decoder()
        self.start = model.config.decoder_start_token_id

    def forward(self, input_ids):
        from transformers.cache_utils import DynamicCache, EncoderDecoderCache

        hidden = self.encoder(input_ids=input_ids).last_hidden_state
        cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
        start = torch.full((input_ids.shape[0], 1), self.start, dtype=torch.long, device=input_ids.device)
        # One decoder step fills the cross-attention cache: the projections HF's attention makes of the hidden states.
        self.decoder(input_ids=start, encoder_hidden_states=hidden, cache=cache, use_cache=True)
        return (hidden, *[t for layer in cache.cross_attention_cache.layers for t in (layer.keys, layer.values)])


def _decoder_class():
    from transformers.cache_utils import DynamicCache, DynamicLayer, EncoderDecoderCache
    from transformers.integrations.executorch import Seq2SeqLMDecoderExportableModuleWithStaticCache

    class _Decoder(Seq2SeqLMDecoderExportableModuleWithStaticCache):
        """HF's exportable decoder (its static self-attention cache), reading the cross-attention K and V it is
        given instead of projecting the hidden states."""

        def forward(self, decoder_input_ids, encoder_hidden_states, cache_position, *cross):
            for layer in self.static_cache.layers:
                layer.cumulative_length.copy_(cache_position[0])
            filled = DynamicCache()
            for i in range(len(cross) // 2):  # the layers made filled (an update would concatenate to an empty one)
                layer = DynamicLayer()
                layer.keys, layer.values, layer.device = cross[2 * i], cross[2 * i + 1], cross[2 * i].device
                layer.is_initialized = True
                filled.layers.append(layer)
            cache = EncoderDecoderCache(self.static_cache, filled)
            for i in range(len(cross) // 2):
                cache.is_updated[i] = True  # HF's attention then reuses them
            outputs = self.decoder(
                input_ids=decoder_input_ids, encoder_hidden_states=encoder_hidden_states, cache=cache, use_cache=True
            )
            return self.lm_head(outputs[0])

    return _Decoder


@quiet  # torch.export's dynamo warnings on HF models (_quiet.py)
def export_encoder_decoder(
    model, max_cache_len: int = 64, max_input_len: int = 128, example_input_ids: torch.Tensor | None = None
) -> dict[str, torch.export.ExportedProgram]:
    """``{"encoder": ..., "decoder": ...}`` for :func:`et_tensorrt.lower`: ``encoder`` takes 1..``max_input_len``
    input ids; ``decoder`` one token, the hidden states, its position (``cache_position``, below ``max_cache_len``)
    and the cross-attention K and V the encoder returned, in order."""
    if not getattr(getattr(model, "config", None), "is_encoder_decoder", False):
        raise OptionError(
            f"{type(model).__name__} is not an encoder-decoder (its config says is_encoder_decoder=False): for a "
            "decoder-only LM use et_tensorrt.llm.export_causal_lm"
        )
    if getattr(model.config, "decoder_start_token_id", None) is None:
        raise OptionError(
            "the model's config has no decoder_start_token_id: set it (the first token the decoder reads)"
        )
    model = model.eval()
    ids = (
        example_input_ids if example_input_ids is not None else torch.ones((1, min(6, max_input_len)), dtype=torch.long)
    )
    length = torch.export.Dim("input_length", min=1, max=max_input_len)
    encoder = _Encoder(model)
    with torch.no_grad():  # as HF's own export
        hidden, *cross = encoder(ids)
        encoder_program = torch.export.export(encoder, (ids,), dynamic_shapes=({1: length},), strict=False)
        decoder = _decoder_class()(model, max_cache_len, ids.shape[0])
        example = (torch.tensor([[model.config.decoder_start_token_id]]), hidden, torch.tensor([0]), *cross)
        shapes = (None, {1: length}, None, tuple({2: length} for _ in cross))
        # strict, as HF exports its decoder: the non-strict trace of its static cache does not decompose
        decoder_program = torch.export.export(decoder, example, dynamic_shapes=shapes, strict=True)
    return {"encoder": encoder_program, "decoder": decoder_program}
