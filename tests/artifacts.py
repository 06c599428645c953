"""Programs several test modules share, each exported and lowered once per test session (issue 53, "lower once").

``shared(tmp_path_factory, key, build)`` returns the :class:`Artifact` ``key``: the first caller of the session runs
``build(folder)``, which writes the files (``.pte``, tokenizer) and returns what its tests need besides them (a
picklable value: the lowering's reports, the vocabulary); every other caller, in this process or in another
pytest-xdist worker, waits on the key's file lock and reads what the first wrote. A build goes to a temporary folder
renamed into place when it is done, so a folder that exists is whole (a build that failed leaves none: the next
caller tries again and fails the same way, in its own test).

The folders live under the session's temporary base (with pytest-xdist, the folder above the workers' own), never
across sessions: an artifact is as fresh as the code that built it. Tests read them and write nothing there
(``Artifact.copy_to`` their own folder to add files). Each artifact below is one program several modules used to
lower on their own, with the same export options: a module needing other options keeps its own lowering.
"""

from __future__ import annotations

import functools
import os
import pickle
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from filelock import FileLock

VALUE = "value.pickle"  # what build() returned (this session's own file, read back by its own tests)


def root(tmp_path_factory) -> Path:
    """The session's folder of artifacts: under pytest-xdist each worker's base temp is ``<session>/popen-gwN``, the
    workers share its parent; without it the base temp is the session's own (its parent holds earlier sessions)."""
    base = tmp_path_factory.getbasetemp()
    session = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder = session / "artifacts"
    folder.mkdir(exist_ok=True)
    return folder


@dataclass(frozen=True)
class Artifact:
    folder: Path  # what build() wrote: read it, write nothing there
    value: object  # what build() returned

    def copy_to(self, folder: Path) -> Path:
        """The artifact's files copied into ``folder`` (a test's own, that it may write in); ``folder``."""
        shutil.copytree(self.folder, folder, dirs_exist_ok=True, ignore=shutil.ignore_patterns(VALUE))
        return folder


def shared(tmp_path_factory, key: str, build: Callable[[Path], object]) -> Artifact:
    """The artifact ``key``, built at most once per session (see the module)."""
    base = root(tmp_path_factory)
    folder = base / key
    with FileLock(str(base / f"{key}.lock")):
        if not folder.is_dir():
            work = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=base))
            try:
                value = build(work)
                (work / VALUE).write_bytes(pickle.dumps(value))
                os.replace(work, folder)
            finally:
                shutil.rmtree(work, ignore_errors=True)  # gone already when the rename took it
    return Artifact(folder, pickle.loads((folder / VALUE).read_bytes()))


# ------------------------------------------------------------------------------------------------ the artifacts

MULTIMODAL_CACHE = 48  # positions: the prompt, the media's tokens and the generated ones


@dataclass(frozen=True)
class Multimodal:
    """What tests read of an ``ExportedMultimodal`` (its programs by method name only) and the lowering's
    partition reports by method."""

    vocab: int
    encoder: str
    encoder_tokens: int
    programs: dict  # method name -> None, in the export's order
    constant_methods: dict
    processor: object
    reports: dict


def build_multimodal(name: str, folder: Path) -> Multimodal:
    """A tiny random HF vision-language or audio LLM (et_tensorrt.testing.multimodal_models.MODELS[name], its
    vocabulary the ASCII tokenizer's) exported by ``export_multimodal(max_seq_len=48)`` and saved with its constant
    methods: ``<name>.pte`` and ``tokenizer.json``. The eager model is ``MODELS[name](vocab)`` again (seeded: the same
    weights)."""
    import et_tensorrt
    from et_tensorrt.llm import export_multimodal
    from et_tensorrt.testing import multimodal_models as models

    vocab = models.ascii_tokenizer(folder / "tokenizer.json")
    exported = export_multimodal(models.MODELS[name](vocab), max_seq_len=MULTIMODAL_CACHE)
    et_tensorrt.save(folder / f"{name}.pte", exported.programs, constant_methods=exported.constant_methods)
    return Multimodal(
        vocab=vocab,
        encoder=exported.encoder,
        encoder_tokens=exported.encoder_tokens,
        programs=dict.fromkeys(exported.programs),
        constant_methods=exported.constant_methods,
        processor=exported.processor,
        reports=dict(et_tensorrt.lower.last_reports),
    )


LLAMA_CONTEXT = 32


def build_tiny_llama(folder: Path) -> dict:
    """A tiny random HF Llama (hidden 32, one layer, its vocabulary the byte-level tokenizer's) exported by
    ``export_prefill_decode``: ``two.pte`` (prefill + decode, MethodsDriver's), ``forward.pte`` (prefill alone as
    ``forward``, TextLLMRunner's), both with LLM constant methods naming an end-of-sequence id the model cannot
    emit (a generation ends at max_new_tokens or the end of the context), and ``tokenizer.json``; the value: the
    vocabulary."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    import et_tensorrt
    from et_tensorrt.llm import export_prefill_decode, llm_methods
    from et_tensorrt.testing import decoders

    vocab = decoders.byte_level_tokenizer(folder / "tokenizer.json")
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=LLAMA_CONTEXT,
    )  # fmt: skip
    methods = export_prefill_decode(LlamaForCausalLM(config).eval())
    constants = llm_methods(max_seq_len=LLAMA_CONTEXT, vocab_size=vocab, bos_id=0, eos_ids=[vocab])
    et_tensorrt.save(folder / "forward.pte", methods["prefill"], constant_methods=constants)
    et_tensorrt.save(folder / "two.pte", methods, constant_methods=constants)
    return {"vocab": vocab}


# The fixtures (tests/conftest.py loads this module as a plugin): a module using one shares a lowered model, for the
# tiers as a module-scoped fixture does (tests/conftest.py), but with no pytest-xdist group: any worker reads it.


@pytest.fixture(scope="session")
def multimodal_artifact(tmp_path_factory) -> Callable[[str], Artifact]:
    """name -> the Artifact of build_multimodal(name)."""
    return lambda name: shared(tmp_path_factory, f"multimodal-{name}", functools.partial(build_multimodal, name))


@pytest.fixture(scope="session")
def tiny_llama_artifact(tmp_path_factory) -> Artifact:
    return shared(tmp_path_factory, "tiny_llama", build_tiny_llama)
