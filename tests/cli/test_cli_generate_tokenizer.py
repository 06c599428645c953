"""Another model's tokenizer (issue 54 row 6): a program carries its tokenizer's identity in its constant methods
(``get_vocab_size``, ``get_bos_id``, ``get_eos_ids``); a tokenizer whose ids fit that vocabulary but whose special
tokens are not the program's is refused by ``generate`` and the drivers, naming both; one that declares no special
tokens cannot be told apart and is taken as before. The program here is a stand-in ``forward`` with the LLM
constant methods (the tokenizer is judged before anything runs); the real decoders with their own tokenizers
generate as before (test_cli_generate.py, tests/models/)."""

from __future__ import annotations

import pytest
import torch

from et_tensorrt.errors import RunnerError
from et_tensorrt.llm import MethodsDriver, TextGenerator, llm_methods
from et_tensorrt.llm.runner.tokenizer_identity import check_tokenizer
from et_tensorrt.testing import decoders

pytest.importorskip("tokenizers")


def _bpe(path, special: list[str], vocab: int) -> int:
    """A byte-level BPE of its own special tokens (another model's), saved as a HF tokenizer.json."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab, special_tokens=special, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tokenizer.train_from_iterator(["a bird flew over the river bank at dawn."] * 8, trainer)
    tokenizer.save(str(path))
    return tokenizer.get_vocab_size()


class _Logits(torch.nn.Module):
    def forward(self, tokens, position):
        return torch.zeros(1, tokens.shape[1], 8) + position


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    from executorch.exir import to_edge

    folder = tmp_path_factory.mktemp("tokenizers")
    vocab = decoders.byte_level_tokenizer(folder / "own.json")  # <s> 0, </s> 1: the program's
    other = _bpe(folder / "other.json", ["<|endoftext|>"], vocab)  # <|endoftext|> 0: ids that fit
    assert other <= vocab
    _bpe(folder / "plain.json", [], vocab)  # no special tokens: nothing to tell it by
    from tokenizers import Tokenizer

    larger = Tokenizer.from_file(str(folder / "own.json"))  # the program's, and 60 tokens more
    larger.add_tokens([f"<extra_{i}>" for i in range(60)])
    larger.save(str(folder / "larger.json"))
    methods = llm_methods(max_seq_len=decoders.MAX_CONTEXT, vocab_size=vocab, bos_id=0, eos_ids=[1])
    program = torch.export.export(_Logits(), (torch.ones(1, 3, dtype=torch.long), torch.tensor([0])))
    (folder / "llm.pte").write_bytes(to_edge(program, constant_methods=methods).to_executorch().buffer)
    return folder


def test_generate_refuses_another_models_tokenizer_naming_both(files, run_cli):
    args = ("generate", "llm.pte", "--tokenizer", "other.json", "--prompt", "the cat")
    line = run_cli(*args, cwd=files).error_line
    assert line == (
        "error: other.json is not the tokenizer llm.pte was exported with: the program's EOS id 1 is no special "
        "token of it (its special tokens: <|endoftext|> 0). Give the model's own tokenizer (the program's: "
        f"vocabulary {decoders.byte_level_tokenizer(files / 'again.json'):,}, BOS 0, EOS 1)"
    )


@pytest.mark.parametrize("driver", [TextGenerator, MethodsDriver])
def test_the_drivers_refuse_it_too(files, driver):
    with pytest.raises(RunnerError, match=r"other\.json is not the tokenizer .*llm\.pte was exported with"):
        driver(files / "llm.pte", files / "other.json")


def test_a_tokenizer_whose_ids_go_past_the_vocabulary_is_refused(files):
    pte = (files / "llm.pte").read_bytes()
    with pytest.raises(RunnerError, match=r"its ids go up to [\d,]+, past the program's vocabulary of [\d,]+"):
        check_tokenizer(pte, files / "llm.pte", files / "larger.json")


@pytest.mark.parametrize("name", ["own.json", "plain.json"])
def test_its_own_tokenizer_or_one_that_cannot_be_told_is_taken(files, name):
    check_tokenizer((files / "llm.pte").read_bytes(), files / "llm.pte", files / name)  # no error
