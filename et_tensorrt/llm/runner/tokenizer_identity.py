"""Whether a tokenizer is the program's own: an LLM program carries its tokenizer's identity in its constant methods
(``get_vocab_size``, ``get_bos_id``, ``get_eos_ids``: ExecuTorch's LLM runners read them), and another model's
tokenizer whose ids happen to fit that vocabulary would generate gibberish without a word. A tokenizer that
disagrees is refused, naming both; where a part cannot be told (the program lacks that method, the tokenizer
declares no special tokens, a file no reader here reads) it is not judged.

What a tokenizer says of itself: a HF ``tokenizer.json`` its ids (the model's vocabulary and its added tokens) and
its special tokens (``added_tokens`` marked ``special``); a tiktoken, SentencePiece or llama2.c file, read with
ExecuTorch's own readers (pytorch_tokenizers, the runners'), its size and its BOS and EOS ids."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from ...errors import RunnerError
from ..constants import _method_names


@dataclass(frozen=True)
class TokenizerIdentity:
    size: int  # one more than its largest id
    special: dict[int, str]  # id -> text of the tokens it declares special ({} when it declares none)
    exact: bool  # ``special`` lists every special token (a tokenizer.json), not its BOS and EOS alone


def _hf_identity(path: str) -> TokenizerIdentity | None:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        vocab = data["model"]["vocab"]
        ids = list(vocab.values()) if isinstance(vocab, dict) else list(range(len(vocab)))  # Unigram: a list
        added = data.get("added_tokens") or []
        ids += [int(t["id"]) for t in added]
        special = {int(t["id"]): str(t["content"]) for t in added if t.get("special")}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return TokenizerIdentity(max(ids) + 1, special, True) if ids else None


def _native_identity(path: str) -> TokenizerIdentity | None:
    from .runner_output import _Captured
    from .tokenizer_files import native_tokenizer

    reader = native_tokenizer(path)
    if reader is None:
        return None
    with _Captured(2):
        try:
            bos, eos = int(reader.bos_tok()), int(reader.eos_tok())
            return TokenizerIdentity(int(reader.vocab_size()), {bos: "BOS", eos: "EOS"}, False)
        except Exception:  # noqa: BLE001 - a reader that names neither: nothing known
            return None


def tokenizer_identity(tokenizer: str | os.PathLike) -> TokenizerIdentity | None:
    """What ``tokenizer`` says of itself; None when no reader here reads it."""
    path = os.fspath(tokenizer)
    return _hf_identity(path) if path.endswith(".json") else _native_identity(path)


def _program_identity(pte: bytes) -> tuple[int | None, int | None, list[int]]:
    """(vocabulary size, BOS id, EOS ids) from the program's constant methods; None / [] for one it lacks."""
    from .program_facts import _constants

    wanted = [n for n in ("get_vocab_size", "get_bos_id", "get_eos_ids") if n in _method_names(pte)]
    got = dict(zip(wanted, _constants(pte, *wanted)))
    vocab, bos = got.get("get_vocab_size"), got.get("get_bos_id")
    return (
        int(vocab[0]) if vocab else None,
        int(bos[0]) if bos else None,
        [int(t) for t in got.get("get_eos_ids", [])],
    )


def check_tokenizer(pte: bytes, model: str | os.PathLike, tokenizer: str | os.PathLike) -> None:
    """RunnerError naming both files when ``tokenizer`` is not the one the program at ``model`` (its bytes:
    ``pte``) was exported with, as far as the two can tell."""
    identity = tokenizer_identity(tokenizer)
    if identity is None:
        return
    vocab, bos, eos = _program_identity(pte)
    problems = []
    if vocab is not None and identity.size > vocab:
        problems.append(f"its ids go up to {identity.size - 1:,}, past the program's vocabulary of {vocab:,}")
    if identity.special:
        ids = ([] if bos is None else [("BOS", bos)]) + [("EOS", t) for t in eos]
        # an id past the program's vocabulary names no token (a program that never stops at one): no evidence
        ids = [(what, i) for what, i in ids if vocab is None or i < vocab]
        if identity.exact:
            strangers = [f"{what} id {i:,}" for what, i in ids if i not in identity.special]
        else:  # a reader that names its BOS and EOS alone: refused only when neither agrees
            agree = (bos is not None and identity.special.get(bos) == "BOS") or any(
                identity.special.get(t) == "EOS" for t in eos
            )
            strangers = [] if agree else [f"{what} id {i:,}" for what, i in ids]
        if strangers:
            theirs = ", ".join(f"{text} {i:,}" for i, text in sorted(identity.special.items()))
            problems.append(f"the program's {', '.join(strangers)} {'is' if len(strangers) == 1 else 'are'} no "
                            f"special token of it (its special tokens: {theirs})")  # fmt: skip
    if problems:
        mine = f"vocabulary {vocab:,}" if vocab is not None else "vocabulary not recorded"
        mine += f", BOS {bos}" if bos is not None else ""
        mine += f", EOS {', '.join(map(str, eos))}" if eos else ""
        raise RunnerError(
            f"{os.fspath(tokenizer)} is not the tokenizer {os.fspath(model)} was exported with: "
            f"{'; '.join(problems)}. Give the model's own tokenizer (the program's: {mine})"
        )
