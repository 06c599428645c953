"""Tokenizer files as the drivers read them: with ExecuTorch's own C++ readers (pytorch_tokenizers, what
TextLLMRunner and MultimodalRunner load), the text those runners print for a token, and the byte-level alphabet of a
HF ``tokenizer.json`` (MethodsDriver's pieces of text)."""

from __future__ import annotations

import os

from .runner_output import _Captured


def native_tokenizer(path: str):
    """``path`` loaded by the one of ExecuTorch's own C++ tokenizers that reads it (pytorch_tokenizers, TextLLMRunner's:
    a HF ``tokenizer.json``, else tiktoken, SentencePiece, llama2.c); None when none reads it."""
    try:
        import pytorch_tokenizers as pt
    except ImportError:
        return None
    kinds = ("CppHFTokenizer",) if path.endswith(".json") else ("CppTiktoken", "CppSPTokenizer", "CppLlama2cTokenizer")
    for kind in kinds:
        with _Captured(2):  # the readers log what they read
            try:
                reader = getattr(pt, kind)()
                reader.load(path)
                return reader
            except Exception:  # noqa: BLE001 - not this format: the next one
                continue
    return None


def token_texts(tokenizer, ids: list[int]) -> tuple[bytes, ...]:
    """What TextLLMRunner prints for each of ``ids`` (its EOS tokens), read with ExecuTorch's own C++ tokenizers;
    empty when none reads the file."""
    reader = native_tokenizer(os.fspath(tokenizer))
    if reader is None:
        return ()
    with _Captured(2):
        try:
            return tuple(reader.decode(i).encode("utf-8") for i in ids)
        except Exception:  # noqa: BLE001 - a token this reader cannot decode: nothing known
            return ()


def byte_decoder() -> dict[str, int]:
    """The byte-level BPE alphabet (GPT-2's): printable character -> the byte it stands for."""
    visible = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = list(visible), 0
    for b in range(256):
        if b not in visible:
            visible.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(visible, chars)}
