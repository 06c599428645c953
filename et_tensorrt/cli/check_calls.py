"""How ``check`` decodes an LLM program's tokens: per family, the calls its driver makes, written once for either side
(the lowered program's Runner, or the eager reference: both have ``run(inputs, method=...)``).

* a text decoder (decoder-only, MoE, recurrent: ``prefill``/``decode`` or ``forward``): the drivers' token loop
  (llm/runner/token_loop.py), with the program's signature and sampling head;
* an encoder–decoder (``encoder``, ``decoder``: Whisper, Speech2Text, T5): ``Transcriber``'s calls, the encoder once
  on a random input of its shape, then the decoder a token a call from the program's decoder prompt, taking the
  encoder's hidden states and cross-attention K/V;
* a multimodal program (``vision_encoder`` or ``audio_encoder``, ``token_embedding``, ``text_decoder``):
  ``MultimodalRunner``'s, the encoder on a random image or audio input of its shape, its embeddings through
  ``text_decoder``, then a text prompt through ``token_embedding`` and ``text_decoder``, then one token a call.

Which family a program is comes from its method names and constant methods alone (a general rule, no model names).
A program that returns logits has its token chosen greedily from them (these drivers' default); one with a sampling
head chooses it itself."""

from __future__ import annotations

from dataclasses import dataclass

import torch

PROMPT_TOKENS = 4  # a text prompt's length (fewer where the context is short)
TEXT_DECODER_FAMILY, ENCODER_DECODER, MULTIMODAL = "text decoder", "encoder-decoder", "multimodal"


@dataclass
class Plan:
    """What one family's decode takes: ``side(runner, reference)`` makes the calls on one side."""

    family: str  # TEXT_DECODER_FAMILY, ENCODER_DECODER or MULTIMODAL
    methods: tuple[str, ...]  # the methods it calls, in the order of their first call
    prompt: list[int]  # the text prompt (an encoder-decoder: its decoder prompt)
    fed: str  # what the first step takes, for the report
    side: object  # (runner, reference: bool) -> a side with first() -> int, next(token) -> int, room: int


def family(names) -> tuple[str, tuple[str, ...]] | None:
    """(the family, the methods its decode calls) of a program of these method names, when it has the constant
    methods that family's driver reads; else None (no LLM)."""
    from ..llm.constants import (
        AUDIO_ENCODER,
        REQUIRED_METHODS,
        SEQ2SEQ_METHODS,
        TEXT_DECODER,
        TOKEN_EMBEDDING,
        VISION_ENCODER,
        decoding_methods,
        is_multimodal,
    )

    names = set(names)
    if {"encoder", "decoder", *SEQ2SEQ_METHODS} <= names:
        return ENCODER_DECODER, ("encoder", "decoder")
    if is_multimodal(names) and set(REQUIRED_METHODS) <= names:
        encoder = next((n for n in (VISION_ENCODER, AUDIO_ENCODER) if n in names), None)
        return (MULTIMODAL, (encoder, TOKEN_EMBEDDING, TEXT_DECODER)) if encoder else None
    decoding = decoding_methods(names)
    return (TEXT_DECODER_FAMILY, decoding) if set(decoding) | set(REQUIRED_METHODS) <= names else None


def plan_for(data: bytes, programs: dict, seed: int) -> Plan | None:
    """The decode plan of a lowered program ``data`` (lowered from ``programs``: method name -> ExportedProgram), or
    None for a program that is no LLM."""
    from ..llm.constants import _method_names

    names = _method_names(data)
    found = family(names)
    if found is None:
        return None
    kind, methods = found
    generator = torch.Generator().manual_seed(seed)
    if kind == ENCODER_DECODER:
        return _seq2seq_plan(data, programs, generator)
    if kind == MULTIMODAL:
        return _multimodal_plan(data, programs, methods[0], generator)
    return _text_plan(data, methods, names, generator, seed)


def _greedy(logits: torch.Tensor) -> int:
    return int(logits.reshape(-1, logits.shape[-1])[-1].argmax())


def _random_input(program, vocab: int, generator: torch.Generator) -> torch.Tensor:
    """A random value of ``program``'s one tensor input, of its exported shape: ids below ``vocab``, else floats."""
    from .inputs import program_input_specs

    (spec,) = [s for s in program_input_specs(program) if not s.is_value]
    if spec.dtype.is_floating_point:
        return torch.randn(spec.shape, generator=generator).to(spec.dtype)
    return torch.randint(0, vocab, spec.shape, generator=generator).to(spec.dtype)


def _text_plan(data, decoding, names, generator, seed) -> Plan:
    from ..llm.runner.program_facts import _constants, _program_facts
    from ..llm.runner.token_loop import TokenLoop
    from ..llm.sampling import Sampling

    signature, context, _ = _program_facts(data, decoding, names)
    (vocab,) = _constants(data, "get_vocab_size")
    length = max(1, min(PROMPT_TOKENS, context - 2))
    prompt = torch.randint(0, int(vocab[0]), (length,), generator=generator).tolist()
    sampling = signature.head or Sampling()

    class Side:
        def __init__(self, runner, reference: bool):
            self.loop = TokenLoop(runner, signature, sampling, seed, device="cpu" if reference else None)
            self.position, self.room = 0, context - length

        def first(self) -> int:
            self.position = length
            return int(self.loop.first(prompt, 0))

        def next(self, token: int) -> int:
            chosen = self.loop.next(torch.tensor([[token]], dtype=torch.int64), self.position)
            self.position += 1
            self.room -= 1
            return int(chosen)

    return Plan(TEXT_DECODER_FAMILY, decoding, prompt, f"the prompt {prompt}", Side)


def _seq2seq_plan(data, programs, generator) -> Plan:
    from ..llm.constants import DECODER_PROMPT, MAX_SEQ_LEN, VOCAB_SIZE
    from ..llm.runner.program_facts import _constants

    prompt_ids, length, vocab = _constants(data, DECODER_PROMPT, MAX_SEQ_LEN, VOCAB_SIZE)
    prompt, length = [int(t) for t in prompt_ids], int(length[0])
    features = _random_input(programs["encoder"], int(vocab[0]), generator)

    class Side:
        def __init__(self, runner, reference: bool):
            self.runner, self.position, self.room = runner, 0, length - len(prompt)

        def _decoder(self, token: int):
            token = torch.tensor([[token]], dtype=torch.long)
            position = torch.tensor([self.position], dtype=torch.long)
            self.position += 1
            return self.runner.run([token, self.hidden, position, *self.cross], method="decoder")[0]

        def first(self) -> int:
            self.hidden, *self.cross = self.runner.run([features], method="encoder")
            for token in prompt:
                logits = self._decoder(token)
            return _greedy(logits)

        def next(self, token: int) -> int:
            self.room -= 1
            return _greedy(self._decoder(token))

    fed = f"a random encoder input {tuple(features.shape)}, then the decoder prompt {prompt}"
    return Plan(ENCODER_DECODER, ("encoder", "decoder"), prompt, fed, Side)


def _multimodal_plan(data, programs, encoder: str, generator) -> Plan:
    from ..llm.constants import TEXT_DECODER, TOKEN_EMBEDDING, VISION_ENCODER
    from ..llm.runner.program_facts import _constants

    context, vocab = (int(v[0]) for v in _constants(data, "get_max_context_len", "get_vocab_size"))
    media = _random_input(programs[encoder], vocab, generator)
    prompt = torch.randint(0, vocab, (2,), generator=generator).tolist()

    class Side:
        def __init__(self, runner, reference: bool):
            self.runner, self.position, self.room = runner, 0, 0

        def _decode(self, embeddings) -> int:
            count = embeddings.shape[1]
            positions = torch.arange(self.position, self.position + count, dtype=torch.long)
            self.position += count
            return _greedy(self.runner.run([embeddings, positions], method=TEXT_DECODER)[0])

        def _text(self, tokens: list[int]) -> int:
            ids = torch.tensor([tokens], dtype=torch.long)
            return self._decode(self.runner.run([ids], method=TOKEN_EMBEDDING)[0])

        def first(self) -> int:
            self._decode(self.runner.run([media], method=encoder)[0])  # the media first, as with no marker
            token = self._text(prompt)
            self.room = context - self.position
            return token

        def next(self, token: int) -> int:
            self.room -= 1
            return self._text([token])

    what = "image" if encoder == VISION_ENCODER else "audio input"
    fed = f"a random {what} {tuple(media.shape)} through {encoder}, then the prompt {prompt}"
    return Plan(MULTIMODAL, (encoder, TOKEN_EMBEDDING, TEXT_DECODER), prompt, fed, Side)
