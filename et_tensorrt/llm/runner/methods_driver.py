"""The Python token loop over a program's methods through :class:`et_tensorrt.Runner` (:class:`MethodsDriver`), for
the programs ExecuTorch's TextLLMRunner does not run: ``prefill``/``decode``, a sampled sequence, a program that
chooses its token in the engine."""

from __future__ import annotations

import os

from ...errors import RunnerError
from ..constants import _method_names, decoding_methods, missing_methods
from .outcome import (
    STOP_CONTEXT,
    STOP_EOS,
    STOP_MAX_NEW_TOKENS,
    Generation,
    _check_files,
    _check_max_new_tokens,
    cannot_start,
)
from .program_facts import _program_facts, _sampling, _seed
from .tokenizer_files import byte_decoder
from .tokenizer_identity import check_tokenizer


class MethodsDriver:
    """Generates text with an LLM program through :class:`et_tensorrt.Runner`, as TextLLMRunner does with ``forward``:
    ``prefill`` (the prompt, one call) then ``decode`` (one token a call), or ``forward`` for both; the prompt's tokens
    as they are (no BOS added), the position kept across :meth:`generate` calls until :meth:`reset`, stopping at an id
    of ``get_eos_ids`` or the context's end. The methods bind the one KV cache in the delegate
    (docs/stateful-decode.md). A program that chooses its token (``export_causal_lm(sampling=...)``) feeds each call's
    token to the next as it is; one that returns logits has the host choose from them with the same sampler and draws
    (:mod:`et_tensorrt.llm.sampling`). Takes a HF ``tokenizer.json`` (the ``tokenizers`` package).
    ``profile``: the Runner's (``True``, ``"layers"``; docs/profiling.md): every prefill and decode call's delegate
    events, one set per call, in :meth:`profile_table` and the ETDump :meth:`write_etdump` writes."""

    def __init__(self, model, tokenizer, data_path=None, *, profile: bool | str = False):
        from tokenizers import Tokenizer

        from ...runtime.runner import Runner

        _check_files(model, tokenizer, data_path)
        with open(model, "rb") as f:
            pte = f.read()
        names = _method_names(pte)
        decoding = decoding_methods(names)
        missing = missing_methods(pte, decoding)
        if missing:
            raise RunnerError(
                f"{os.fspath(model)} is not an LLM program of prefill and decode methods, nor of forward: it has no "
                f"method(s) {', '.join(missing)}; lower it with constant_methods=et_tensorrt.llm.llm_methods(...)"
            )
        check_tokenizer(pte, model, tokenizer)
        self._tokenizer = Tokenizer.from_file(os.fspath(tokenizer))
        self._runner = Runner(pte, data_path=data_path, profile=profile)
        self.signature, self._context, self._eos = _program_facts(pte, decoding, names)
        for method in dict.fromkeys((self.signature.prefill, self.signature.decode)):
            # loaded now, as TextLLMRunner's load() loads its method: a generation's seconds are its calls'
            self._runner.load_method(method)
        self._position = 0
        self._bytes = byte_decoder()
        self.log = ""

    def _piece(self, token: int) -> bytes:
        text = self._tokenizer.id_to_token(token) or ""
        return bytes(self._bytes[c] for c in text if c in self._bytes)

    def generate(
        self,
        prompt: str,
        max_new_tokens: int = 16,
        temperature: float | None = None,
        on_token=None,
        *,
        top_k: int | None = None,
        top_p: float | None = None,
        seed: int | None = None,
    ) -> Generation:
        """``temperature``/``top_k``/``top_p``: :class:`~et_tensorrt.llm.sampling.Sampling`'s (its defaults; a
        program that chooses its token takes them as call inputs, its export's choices the defaults and its top_k the
        most a request may ask; temperature 0 is its argmax).
        ``seed``: the draws' (the same seed, the same text, on every machine); default one drawn from torch's
        generator (``torch.manual_seed`` makes it repeat). ``on_token``: called with each piece of text (bytes) as
        it is generated."""
        import time

        from .token_loop import TokenLoop

        _check_max_new_tokens(max_new_tokens)
        sampling = _sampling(self.signature, temperature, top_k, top_p)
        seed = _seed(seed, sampling)
        tokens = self._tokenizer.encode(prompt, add_special_tokens=False).ids
        why = cannot_start(self._position, len(tokens), self._context)
        if why:
            raise RunnerError(f"cannot generate: {why}")
        asked, max_new_tokens = max_new_tokens, min(max_new_tokens, self._context - self._position - len(tokens))
        loop = TokenLoop(self._runner, self.signature, sampling, seed)
        began = time.perf_counter()
        token = loop.first(tokens, self._position)
        self._position += len(tokens)
        out, generated, steps, ended = [], 0, [], False
        while True:
            value = int(token)  # the host reads the token's 8 bytes: to stream its text and see the end
            generated += 1
            if value in self._eos:
                ended = True
                break
            out.append(self._piece(value))
            if on_token is not None:
                on_token(out[-1])
            if generated == max_new_tokens:
                break
            token = loop.next(token, self._position)
            steps.append(self._runner.last_plan.bytes_copied)
            self._position += 1
        counted = "every copy of the decode call, the method boundary's included (Runner's placement plan)"
        seconds = time.perf_counter() - began
        where = "chosen in the program" if self.signature.head is not None else "chosen on the host from the logits"
        how = str(sampling) + ("" if sampling.greedy else f", seed {seed}") + f"; {where}"
        stopped = STOP_EOS if ended else STOP_CONTEXT if max_new_tokens < asked else STOP_MAX_NEW_TOKENS
        return Generation(
            b"".join(out), len(tokens), generated, seconds, tuple(steps), counted if steps else "",
            stopped=stopped, by=f"et_tensorrt.llm.MethodsDriver ({self.signature.prefill}/"
            f"{self.signature.decode} methods)", sampling=how,
        )  # fmt: skip

    def reset(self) -> None:
        """The next ``generate`` starts at position 0 (the cache rows it leaves are masked, not cleared)."""
        self._position = 0

    def profile_table(self):
        """The delegates' events since the driver loaded its methods (or the last :meth:`write_etdump`), per phase
        (``Runner.profile_table``): a generation of N tokens is one prefill and N - 1 decode calls' events."""
        return self._runner.profile_table()

    def write_etdump(self, path) -> int:
        """The ETDump of those events, for ``executorch.devtools.Inspector``; the profile then starts over."""
        return self._runner.write_etdump(path)
