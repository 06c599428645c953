"""Issue 44, row 11: the Python API is as quiet as the command line. In a fresh interpreter, each of our imports and
calls (the quantizer's import, the first to import torchao; explain, lower and Runner; the LLM exporter on a HF model,
whose torch.export has dynamo warn) prints nothing on stderr but et_tensorrt's own notices. The user's own
imports between them (transformers' modeling code) say what they say: they are not ours to quiet (_quiet.py)."""

from __future__ import annotations

import pytest
from doc_blocks import run_python

SCRIPT = """
import sys, torch

def mark(label):
    print("== " + label, file=sys.stderr, flush=True)

mark("ours: import")
import et_tensorrt
from et_tensorrt.quantization import TensorRTQuantizer  # the first import of torchao in this process
from et_tensorrt import Runner, explain, lower
from et_tensorrt.llm import export_causal_lm
mark("user: transformers, torch.export")
import transformers
llama = transformers.LlamaForCausalLM(transformers.LlamaConfig(
    vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
    num_key_value_heads=1)).eval()
x = torch.randn(2, 16)
program = torch.export.export(torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU()).eval(), (x,))
mark("ours: calls")
explain(program)
(y,) = Runner(lower(program, min_block_size=1)).run([x])
export_causal_lm(llama, max_seq_len=16)
mark("end")
"""


def test_our_imports_and_calls_print_only_our_notices(tmp_path):
    pytest.importorskip("transformers")
    proc = run_python(SCRIPT, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    section, ours = None, []
    for line in proc.stderr.splitlines():
        if line.startswith("== "):
            section = line[3:]
        elif section and section.startswith("ours") and not line.startswith("et_tensorrt: "):
            ours.append(f"{section}: {line}")
    assert ours == [], "\n".join(ours)
    assert "== ours: calls" in proc.stderr and "== end" in proc.stderr
