"""Models of LLM size: lowering time, peak memory and file sizes against the weights, et_tensorrt beside XNNPACK.

Cases (random weights, nothing downloaded):

* ``stack-0.5``, ``stack-1``, ``stack-2.25``, ``stack-4``: ``Linear(8192, 8192, bias=False)`` stacks of 2, 4, 9 and
  16 layers in fp32 (0.5 to 4 GiB of weights), input ``(1, 8192)``;
* ``llama-1b``: ExecuTorch's ``examples/models/llama`` Transformer shaped like Llama-3.2-1B (dim 2048, 16 layers,
  32 heads, 8 KV heads, hidden 8192; its vocabulary the test tokenizer's, so the 0.97 B parameters are the
  decoder's) in fp16 with ``use_kv_cache``, lowered with ``precision="fp16"``, the KV cache owned by the delegate,
  and the constant methods ExecuTorch's ``TextLLMRunner`` reads.

Each (case, backend) lowers in a fresh process: et_tensorrt with ``et_tensorrt.save(..., named_data="ptd")``
(the engines and weights in a .ptd beside the .pte, written piece by piece) and its progress recording each step's
time and peak resident memory; XNNPACK with ``to_edge_transform_and_lower(XnnpackPartitioner())``,
``to_executorch`` and ``write_to_file``. Per row: seconds of the lowering (export to files written, the model's
construction excluded), the process's peak RSS and its ratio to the weight bytes, the .pte and .ptd bytes. Both
build cold (``cache=False``). ``--verify`` then loads each program in another fresh process (``Runner`` with the
.ptd; ExecuTorch's runtime for XNNPACK) and compares with eager; for ``llama-1b`` it decodes a few tokens through
``Runner`` against eager and generates through ``TextLLMRunner``. Without a GPU the delegate runs its embedded
program with PyTorch: the verify times are not TensorRT's.

A case whose expected peak does not fit the memory available now (``MemAvailable`` less 3 GiB) is skipped, said
so in its row. ``--baseline`` lowers with ``et_tensorrt.lower`` (no named data, no progress): what an older
checkout can do (run it with ``PYTHONPATH=<checkout>``).

    python scripts/bench_large.py --cases stack-0.5,stack-1 --backends et_tensorrt,xnnpack [--verify] [--json out]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

GiB = 2**30
STACKS = {"stack-0.5": 2, "stack-1": 4, "stack-2.25": 9, "stack-4": 16}  # case: layers
STACK_WIDTH = 8192
STACK_LAYER_BYTES = STACK_WIDTH * STACK_WIDTH * 4  # one fp32 Linear(8192, 8192, bias=False): 0.25 GiB
CASES = (*STACKS, "llama-1b")
# Each case's weights, for its expected peak (llama-1b: its 0.97 B fp16 parameters)
WEIGHT_BYTES = {**{case: layers * STACK_LAYER_BYTES for case, layers in STACKS.items()}, "llama-1b": 1.9 * GiB}
BACKENDS = ("et_tensorrt", "xnnpack")
# Expected peak / weight bytes, to skip a case that cannot fit (measured; plus the interpreter's ~1 GiB)
EXPECTED = {"et_tensorrt": 2.5, "et_tensorrt-baseline": 7.5, "xnnpack": 4.5}
LLAMA = dict(dim=2048, n_layers=16, n_heads=32, n_kv_heads=8, hidden_dim=8192, max_seq_len=64)
TOKENS = [3, 5, 7, 11, 13, 2]


def _available() -> int:
    """``MemAvailable`` of /proc/meminfo, in bytes."""
    with open("/proc/meminfo") as f:
        return next((int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:")), 0)


# ------------------------------------------------------------------------------------------------ models


class Stack:
    def __init__(self, layers: int):
        import torch

        torch.manual_seed(0)
        with torch.no_grad():
            self.model = (
                torch.nn.Sequential(*[torch.nn.Linear(STACK_WIDTH, STACK_WIDTH, bias=False) for _ in range(layers)])
                .eval()
                .requires_grad_(False)
            )
        self.inputs = (torch.randn(1, STACK_WIDTH, generator=torch.Generator().manual_seed(1)),)
        self.options = {"min_block_size": 1}
        self.constant_methods = None


class Llama:
    def __init__(self, tokenizer: str):
        import torch
        from executorch.examples.models.llama.llama_transformer import construct_transformer
        from executorch.examples.models.llama.model_args import ModelArgs

        from et_tensorrt.llm import llm_methods
        from et_tensorrt.testing.decoders import byte_level_tokenizer

        self.vocab = byte_level_tokenizer(tokenizer)
        args = ModelArgs(
            **LLAMA,
            vocab_size=self.vocab,
            max_context_len=LLAMA["max_seq_len"],
            max_batch_size=1,
            use_kv_cache=True,
            enable_dynamic_shape=False,
        )
        torch.manual_seed(0)
        default = torch.get_default_dtype()
        torch.set_default_dtype(torch.float16)  # built in fp16: no fp32 copy of 2 GB on the way
        try:
            self.model = construct_transformer(args).eval().requires_grad_(False).to(torch.float16)
        finally:
            torch.set_default_dtype(default)
        # its forward(tokens, attn_options): the write position travels in a dict
        self.inputs = (torch.tensor([[1]], dtype=torch.long), {"input_pos": torch.tensor([0], dtype=torch.long)})
        self.options = {"precision": "fp16"}
        self.constant_methods = llm_methods(
            max_seq_len=LLAMA["max_seq_len"], vocab_size=self.vocab, bos_id=0, eos_ids=[1], enable_dynamic_shape=False
        )

    def export(self):
        import torch

        return torch.export.export(self.model, self.inputs, strict=False)

    def eager(self, token: int, pos: int):
        import torch

        with torch.no_grad():
            out = self.model(torch.tensor([[token]]), {"input_pos": torch.tensor([pos])})
        return out[0] if isinstance(out, (tuple, list)) else out


def _build(case: str, folder: str):
    return Stack(STACKS[case]) if case in STACKS else Llama(os.path.join(folder, "tokenizer.json"))


def _weight_bytes(model) -> int:
    import torch

    tensors = {id(t): t for t in (*model.parameters(), *model.buffers()) if isinstance(t, torch.Tensor)}
    caches = {id(b) for n, b in model.named_buffers() if "cache" in n}
    return sum(t.numel() * t.element_size() for i, t in tensors.items() if i not in caches)


# ----------------------------------------------------------------------------------------- one lowering


def lower_child(
    case: str, backend: str, folder: str, baseline: bool, validate: bool = False, device_build: bool = True
) -> dict:
    import torch

    import et_tensorrt
    from et_tensorrt.progress import rss_bytes

    built = _build(case, folder)
    if validate:
        built.options["validate"] = True
    if not device_build and backend == "et_tensorrt" and not baseline:
        built.options["device_build"] = False
    model = built.model
    label = backend + (" (before)" if baseline else "") + (" +validate" if validate else "")
    label += " -device_build" if "device_build" in built.options else ""
    row = {"case": case, "backend": label, "weight_bytes": _weight_bytes(model)}
    row["model_rss"] = rss_bytes()
    pte = os.path.join(folder, f"{case}-{backend}.pte")
    exported = built.export() if isinstance(built, Llama) else None
    args = (exported, ()) if exported is not None else (model, built.inputs)  # et_tensorrt's (program, inputs)
    start = time.perf_counter()
    if backend == "xnnpack":
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
        from executorch.exir import to_edge_transform_and_lower

        program = exported if exported is not None else torch.export.export(model, built.inputs)
        edge = to_edge_transform_and_lower(
            program, partitioner=[XnnpackPartitioner()], constant_methods=built.constant_methods
        )
        del program
        manager = edge.to_executorch()
        with open(pte, "wb") as f:
            manager.write_to_file(f)
        row["ptd_bytes"] = 0
    elif baseline:
        data = et_tensorrt.lower(*args, cache=False, constant_methods=built.constant_methods, **built.options)
        with open(pte, "wb") as f:
            f.write(data)
        del data
        row["ptd_bytes"] = 0
    else:
        from et_tensorrt.progress import Progress

        progress = Progress(show="log", measure_memory=True)
        saved = et_tensorrt.save(
            pte,
            *args,
            cache=False,
            named_data="ptd",
            constant_methods=built.constant_methods,
            progress=progress,
            **built.options,
        )
        row["ptd_bytes"] = saved.ptd_bytes
        row["stages"] = [
            {"label": r.label, "step": r.step, "seconds": round(r.seconds, 2), "peak": r.peak_bytes}
            for r in progress.records
        ]
        row["progress_peak"] = progress.peak_bytes
    row["seconds"] = time.perf_counter() - start
    row["pte_bytes"] = os.path.getsize(pte)
    # measure_memory resets the kernel's peak mark at each step: the progress holds the run's peak then
    row["peak_rss"] = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, row.get("progress_peak") or 0)
    return row


# ------------------------------------------------------------------------------------------- verification


def _eager(model, inputs):
    import torch

    with torch.no_grad():
        return model(*inputs)


def verify_child(case: str, backend: str, folder: str) -> dict:
    import et_tensorrt
    from et_tensorrt.progress import rss_bytes

    pte = os.path.join(folder, f"{case}-{backend}.pte")
    ptd = os.path.splitext(pte)[0] + ".ptd"
    built = _build(case, folder)
    row = {"case": case, "backend": backend}
    if isinstance(built, Llama):
        return _verify_llama(built, backend, pte, ptd, row)
    expected = _eager(built.model, built.inputs)
    del built.model
    gc.collect()
    before = rss_bytes()
    start = time.perf_counter()
    if backend == "xnnpack":
        from executorch.runtime import Runtime

        method = Runtime.get().load_program(pte).load_method("forward")
        row["load_rss_delta"] = rss_bytes() - before
        got = method.execute(list(built.inputs))[0]
    else:
        runner = et_tensorrt.Runner(pte, data_path=ptd if os.path.exists(ptd) else None)
        row["load_rss_delta"] = rss_bytes() - before
        got = runner.run(list(built.inputs))[0]
        row["executor"] = runner.last_plans[0].executor if runner.last_plans else ""
    row["run_seconds"] = time.perf_counter() - start
    row["max_abs_error"] = float((got.float() - expected.float()).abs().max())
    row["tolerance"] = 1e-3 * float(expected.abs().max())
    row["ok"] = row["max_abs_error"] <= row["tolerance"]
    return row


def _verify_llama(built: Llama, backend: str, pte: str, ptd: str, row: dict) -> dict:
    import torch

    import et_tensorrt
    from et_tensorrt.llm import TextGenerator

    data = ptd if os.path.exists(ptd) else None
    if backend == "xnnpack":
        from executorch.runtime import Runtime

        method = Runtime.get().load_program(pte).load_method("forward")

        def run(token, pos):
            return method.execute([torch.tensor([[token]]), torch.tensor([pos])])[0]

    else:
        runner = et_tensorrt.Runner(pte, data_path=data)

        def run(token, pos):
            return runner.run([torch.tensor([[token]]), torch.tensor([pos])])[0]

    errors, greedy = [], []
    for pos, token in enumerate(TOKENS[:4]):
        expected = built.eager(token, pos)
        got = run(token, pos)
        errors.append(float((got.float() - expected.float().reshape(got.shape)).abs().max()))
        greedy.append(int(got.reshape(-1, got.shape[-1])[-1].argmax()))
    row["max_abs_error"] = max(errors)
    row["decoded_tokens"] = len(errors)
    row["ok"] = row["max_abs_error"] < 0.1
    if backend != "xnnpack":
        del runner
    gc.collect()
    generator = TextGenerator(pte, os.path.join(os.path.dirname(pte), "tokenizer.json"), data_path=data)
    generation = generator.generate("the cat", max_new_tokens=4)
    row["text_llm_runner_tokens"] = generation.generated_tokens
    row["text_llm_runner_tokens_per_s"] = round(generation.tokens_per_second, 2)
    row["ok"] = row["ok"] and generation.generated_tokens > 0
    return row


# -------------------------------------------------------------------------------------------------- driver


def _child(
    mode: str, case: str, backend: str, folder: str, baseline: bool, validate: bool = False, device_build: bool = True
) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", mode, case, backend, folder]
    if baseline:
        cmd.append("--baseline")
    if validate:
        cmd.append("--validate")
    if not device_build:
        cmd.append("--no-device-build")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.run(["nice", "-n", "10", *cmd], capture_output=True, text=True, env=env, check=False)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-8:]
    return {"case": case, "backend": backend, "error": f"exit {proc.returncode}: " + " | ".join(tail)}


def _expected_peak(case: str, backend: str, baseline: bool, factor: float | None = None) -> float:
    factor = factor or EXPECTED["et_tensorrt-baseline" if baseline and backend == "et_tensorrt" else backend]
    return WEIGHT_BYTES[case] * factor + GiB


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--verify", action="store_true", help="load and run each program against eager")
    parser.add_argument("--baseline", action="store_true", help="lower with et_tensorrt.lower only (older checkouts)")
    parser.add_argument("--folder", help="where the programs go (default: a temp folder, removed)")
    parser.add_argument("--expect", type=float, help="expected peak / weights (skips what cannot fit)")
    parser.add_argument("--validate", action="store_true", help="et_tensorrt: onnxruntime checks each ONNX first")
    parser.add_argument(
        "--device-build",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="et_tensorrt: a build recipe in each blob (the default; --no-device-build: its cost, side by side)",
    )
    parser.add_argument("--json", help="write the rows here")
    parser.add_argument("--child", nargs=4, metavar=("MODE", "CASE", "BACKEND", "FOLDER"), help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        import logging

        logging.basicConfig(level=logging.INFO, format="  %(message)s", stream=sys.stderr)
        mode, case, backend, folder = args.child
        if mode == "lower":
            row = lower_child(case, backend, folder, args.baseline, args.validate, args.device_build)
        else:
            row = verify_child(case, backend, folder)
        print(json.dumps(row), flush=True)
        return 0

    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_large-", dir=args.folder) as folder:
        for case in args.cases.split(","):
            for backend in args.backends.split(","):
                need, have = _expected_peak(case, backend, args.baseline, args.expect), _available() - 3 * GiB
                if need > have:
                    row = {
                        "case": case,
                        "backend": backend,
                        "error": f"skipped: expects ~{need / GiB:.1f} GiB, {have / GiB:.1f} GiB available",
                    }
                else:
                    row = _child("lower", case, backend, folder, args.baseline, args.validate, args.device_build)
                    if args.verify and "error" not in row:
                        row["verify"] = _child("verify", case, backend, folder, False)
                rows.append(row)
                print(_line(row), flush=True)
                for name in os.listdir(folder):
                    if name.startswith(f"{case}-{backend}."):
                        os.remove(os.path.join(folder, name))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


def _line(row: dict) -> str:
    if "error" in row:
        return f"{row['case']:10s} {row['backend']:22s} {row['error']}"
    w = row["weight_bytes"]
    text = (
        f"{row['case']:10s} {row['backend']:22s} {w / GiB:5.2f} GiB  {row['seconds']:6.1f} s  "
        f"peak {row['peak_rss'] / GiB:5.2f} GiB ({row['peak_rss'] / w:.2f}x)  "
        f".pte {row['pte_bytes'] / GiB:.2f} GiB  .ptd {row['ptd_bytes'] / GiB:.2f} GiB"
    )
    v = row.get("verify")
    if v:
        text += f"  verify: {'ok' if v.get('ok') else 'FAILED'} {json.dumps(v)}"
    return text


if __name__ == "__main__":
    sys.exit(main())
