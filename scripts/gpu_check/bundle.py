"""Prepare what the GPU check carries to the device machine, split into device calls of at most 60 MiB.

    python scripts/gpu_check/bundle.py DIR [--anywhere] [--roofline-shape llama-3.2-1b|tiny]

Run from a checkout with et_tensorrt importable (PYTHONPATH=<repo>, extension built) and the registry
reachable (pip download). DIR must be an ignored folder inside the checkout whose device calls it is for
(default in scripts/gpu_check.sh: .gpucheck), because a call carries only the working tree and the ignored
paths named in ``carry``. ``--anywhere`` lifts that rule (scripts/gpu_check.sh --local bundles into a scratch
folder). Prints one line per call, ``call N: X MiB``, X counting the working tree too.

What travels (in this order, so call 1 holds what the build needs):
  programs.tar             the .pte files lowered here by et_tensorrt.lower (check_models.PROGRAMS), the
                           models' weights, inputs and eager CPU outputs (refs.pt), and programs.json; the
                           roofline decoders' .pte and gzipped .ptd (--roofline-shape)
  executorch-runtime-*.zip from the cp312 ExecuTorch wheel: include/, libexecutorch.so, the kernel library
                           and its thread pool, and the wheel's RECORD (checked on the machine)
  tensorrt_rtx-*-python.tar the tensorrt_rtx Python package (pure Python) of the version installed here
  tensorrt_rtx_cu13_bindings-*.whl  cp312 bindings
  tensorrt_rtx_cu13_libs-*.whl      libtensorrt_rtx.so.1 (234 MB unpacked): split over two calls
Our sources travel with the working tree; the manifest records their SHA-256 and the machine refuses a
working tree that differs from the one the programs were lowered with.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import importlib.metadata
import json
import os
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))

import transport  # noqa: E402  (after the sys.path line above)

PYTHON_TAG = "cp312"  # the device machine's Python (3.12)
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
TRT_VARIANT = "cu13"  # the device machine's torch is +cu130
# What the runtime needs from the ExecuTorch wheel: headers, the runtime, its CPU kernels (and their pool), the ETDump
# generator (et_tensorrt._C links it: Runner(..., profile=True)).
EXECUTORCH_LIBS = (
    "libexecutorch.so",
    "libexecutorch_kernels_optimized.so",
    "libexecutorch_threadpool.so",
    "libexecutorch_etdump.so",
)
EXECUTORCH_CONFIG = "executorch/lib/cmake/executorch/executorch-config.cmake"
# Sources the device machine builds and runs (compared by SHA-256 with the working tree that arrives there).
SOURCE_PREFIXES = ("et_tensorrt/", "extension/", "pybindings/", "scripts/gpu_check/")
SOURCE_FILES = ("CMakeLists.txt", "setup.py", "cmake_args.py", "pyproject.toml", "scripts/gpu_check.sh")


def log(message: str) -> None:
    print(f"[bundle] {message}", flush=True)


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout


def travelling_files() -> list[str]:
    """What a device call sends of this checkout: tracked files and untracked files git does not ignore."""
    out = git("ls-files", "-z", "--cached", "--others", "--exclude-standard")
    return sorted({p for p in out.split("\0") if p and (ROOT / p).is_file()})


def tree_bytes(files: list[str]) -> int:
    total = sum((ROOT / p).stat().st_size for p in files)
    shared = ROOT / "shared"  # a shared/ folder inside the checkout travels as well
    if shared.is_dir():
        total += transport.folder_bytes(shared)
    return total


def sources(files: list[str]) -> dict[str, str]:
    picked = [p for p in files if p.startswith(SOURCE_PREFIXES) or p in SOURCE_FILES]
    return {p: transport.sha256_file(ROOT / p) for p in picked if "__pycache__" not in p}


# ------------------------------------------------------------------------------------------ wheels
def pip_download(requirement: str, dest: Path) -> Path:
    """One cp312 manylinux wheel from the registry (pip's own cache makes a repeat cheap)."""
    dest.mkdir(parents=True, exist_ok=True)
    name = requirement.split("==")[0].replace("-", "_").lower()
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--python-version",
        "3.12",
        "--implementation",
        "cp",
        "--disable-pip-version-check",
        "-q",
        "-d",
        str(dest),
        requirement,
    ]
    for platform in PLATFORMS:
        cmd += ["--platform", platform]
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        lines = [line for line in result.stderr.splitlines() if "is ignored" not in line]
        raise SystemExit(f"pip download {requirement} failed:\n" + "\n".join(lines[-8:]))
    version = requirement.split("==")[1]
    found = [p for p in dest.glob("*.whl") if p.name.lower().startswith(f"{name}-{version}-")]
    if len(found) != 1:
        raise SystemExit(f"expected one wheel for {requirement} in {dest}, found {[p.name for p in found]}")
    return found[0]


def trim_executorch(wheel: Path, out: Path) -> Path:
    """The runtime part of the ExecuTorch wheel, each member checked against the wheel's RECORD."""
    with zipfile.ZipFile(wheel) as z:
        record_name = next(n for n in z.namelist() if n.endswith(".dist-info/RECORD"))
        hashes = transport.record_hashes(z.read(record_name).decode())
        # and the wheel's CMake config: CMakeLists.txt reads ExecuTorch's compile definitions from it
        libs = {f"executorch/lib/{lib}" for lib in EXECUTORCH_LIBS} | {EXECUTORCH_CONFIG}
        wanted = [n for n in z.namelist() if (n.startswith("executorch/include/") and not n.endswith("/")) or n in libs]
        missing = [name for name in sorted(libs) if name not in wanted]
        if missing:
            raise SystemExit(f"{wheel.name} has no {missing}: executorch>=1.5.1,<1.6 ships them")
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as trimmed:
            for name in wanted:
                data = z.read(name)
                if hashlib.sha256(data).hexdigest() != hashes.get(name):
                    raise SystemExit(f"{wheel.name}: {name} does not match the wheel's RECORD")
                trimmed.writestr(name, data)
            trimmed.writestr("RECORD", z.read(record_name))
    return out


def tensorrt_python_package(version: str, out: Path) -> Path:
    """The pure-Python ``tensorrt_rtx`` package installed here (same version as the engines' builder)."""
    dist = importlib.metadata.distribution(f"tensorrt_rtx_{TRT_VARIANT}")
    if dist.version != version:
        raise SystemExit(f"tensorrt_rtx_{TRT_VARIANT} {dist.version} is installed, TensorRT-RTX reports {version}")
    with tarfile.open(out, "w") as tar:
        for f in dist.files or []:
            path = str(f)
            if path.startswith("tensorrt_rtx/") and path.endswith(".py"):
                if f.hash is not None:
                    data = Path(f.locate()).read_bytes()
                    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                    if digest != f.hash.value:
                        raise SystemExit(f"installed {path} differs from its RECORD: reinstall tensorrt-rtx")
                tar.add(f.locate(), arcname=path)
    return out


# ---------------------------------------------------------------------------------------- programs
def delegate_spans(pte: bytes) -> list[dict]:
    """(offset, size) of each of our delegate blobs inside the .pte, found with ExecuTorch's own reader."""
    from executorch.exir._serialize._program import deserialize_pte_binary

    import et_tensorrt.compile_specs as cs

    program = deserialize_pte_binary(pte).program
    spans = []
    for plan in program.execution_plan:
        for d in plan.delegates:
            if d.id != cs.BACKEND_ID:
                continue
            payload = bytes(program.backend_delegate_data[d.processed.index].data)
            offset = pte.find(payload)
            if offset < 0:
                raise SystemExit("a delegate blob is not stored verbatim in the .pte")
            spans.append({"method": plan.name, "offset": offset, "size": len(payload)})
    return spans


def quantized(model, how: str):
    """``model`` quantized with torchao for a ProgramSpec's ``quantize`` (here only: the device machine has no
    torchao; it compares with the eager outputs computed here)."""
    if not how:
        return model
    if how != "int4-weight-only":
        raise SystemExit(f"unknown quantization {how!r} in check_models.PROGRAMS")
    import torch
    from torchao.quantization import IntxWeightOnlyConfig, quantize_
    from torchao.quantization.granularity import PerGroup

    quantize_(model, IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(32)))
    return model


def lower_programs(work: Path, roofline_shape: str) -> Path:
    import warnings

    import check_models
    import torch

    import et_tensorrt
    from et_tensorrt.parity import for_precision  # the tolerances `et-tensorrt check` uses, per precision

    warnings.filterwarnings("ignore", category=FutureWarning)  # torch's pytree deprecations, once per node
    out = work / "programs"
    out.mkdir(parents=True, exist_ok=True)
    refs: dict = {"programs": {}, "models": {}}
    table = []
    for spec in check_models.PROGRAMS:
        t0 = time.perf_counter()
        model = quantized(check_models.build_model(spec.model), spec.quantize)
        inputs = check_models.example_inputs(spec.model)
        with torch.no_grad():
            expected = model(*inputs)
        expected = list(expected) if isinstance(expected, (tuple, list)) else [expected]
        pte = et_tensorrt.lower(
            model,
            tuple(inputs),
            min_block_size=1,
            precision=spec.precision,
            zero_copy_outputs=spec.zero_copy_outputs,
            **spec.options,
        )
        report = et_tensorrt.lower.last_report
        (out / f"{spec.name}.pte").write_bytes(pte)
        spans = delegate_spans(pte)
        if not spans:
            raise SystemExit(f"{spec.name}: nothing was delegated; the check needs an engine")
        refs["programs"][spec.name] = {"inputs": inputs, "expected": [e.detach() for e in expected]}
        if spec.decode:  # eager from a fresh model (the one above has written position 0 into its cache)
            decoder = check_models.build_model(spec.model)
            steps = []
            with torch.no_grad():
                for position in range(len(check_models.DECODE_TOKENS)):
                    step = check_models.decode_inputs(position)
                    steps.append({"inputs": step, "expected": [decoder(*step).detach()]})
            refs["programs"][spec.name]["steps"] = steps
        if not spec.quantize:  # the float weights, for eager CUDA timings (torchao is not on the device machine)
            refs["models"][spec.model] = model.state_dict()
        tol, fp32 = for_precision(spec.precision), for_precision("fp32")
        table.append(
            {
                "name": spec.name,
                "model": spec.model,
                "precision": spec.precision,
                "zero_copy_outputs": spec.zero_copy_outputs,
                "options": spec.options,
                "quantize": spec.quantize,
                "shows": spec.shows,
                "decode": spec.decode,
                "pte": f"{spec.name}.pte",
                "pte_bytes": len(pte),
                "delegates": spans,
                "delegated_nodes": len(report.delegated),
                "host_nodes": len(report.host_nodes),
                "tolerance": {"atol": tol.atol, "rtol": tol.rtol},
                "fp32_tolerance": {"atol": fp32.atol, "rtol": fp32.rtol},
            }
        )
        log(
            f"lowered {spec.name}: {len(pte) / transport.MiB:.2f} MiB, {len(spans)} delegate(s), "
            f"{time.perf_counter() - t0:.1f} s"
        )
    refs["methods"] = {"decoder_methods": lower_methods(out)}
    refs["next_token"] = lower_next_token(out)
    refs["roofline"] = {}
    for quantize in ("", "int4-weight-only"):
        spec = lower_roofline(out, roofline_shape, quantize)
        refs["roofline"][spec["pte"].removesuffix(".pte")] = spec
    torch.save(refs, out / "refs.pt")
    (out / "programs.json").write_text(json.dumps(table, indent=1))
    tar_path = work / "programs.tar"
    with tarfile.open(tar_path, "w") as tar:
        for p in sorted(out.iterdir()):
            tar.add(p, arcname=f"programs/{p.name}")
    return tar_path


def lower_methods(out: Path) -> dict:
    """Issue 34: ExecuTorch's llama (tiny random config, ``enable_dynamic_shape``) as ``prefill`` (a dynamic length)
    and ``decode`` (one token) methods of one program, and its eager steps: the prompt, then one token a call."""
    import check_models
    import torch

    import et_tensorrt
    from et_tensorrt.parity import for_precision
    from et_tensorrt.testing import decoders

    t0 = time.perf_counter()
    decoder = decoders.executorch_llama(dynamic=True)
    pte = et_tensorrt.lower(decoders.prefill_decode(decoder), cuda_graph="decode")  # rows run it with and without
    (out / "decoder_methods.pte").write_bytes(pte)
    tokens, prompt, steps, start = check_models.DECODE_TOKENS, 4, [], 0
    for call in [tokens[:prompt]] + [[t] for t in tokens[prompt:]]:
        args, kwargs = decoder.inputs(call, start)
        with torch.no_grad():
            expected = decoder.eager(*args, **kwargs)
        method = "prefill" if start == 0 else "decode"
        steps.append({"method": method, "inputs": decoders._flat((args, kwargs)), "expected": [expected.detach()]})
        start += len(call)
    tol = for_precision("fp32")
    log(f"lowered decoder_methods: {len(pte) / transport.MiB:.2f} MiB, {time.perf_counter() - t0:.1f} s")
    return {"pte": "decoder_methods.pte", "steps": steps, "tolerance": {"atol": tol.atol, "rtol": tol.rtol}}


NEXT_TOKEN_STEPS = 24


def lower_next_token(out: Path) -> dict:
    """Issue 46: ExecuTorch's llama (tiny random config, ``enable_dynamic_shape``) as ``prefill`` and ``decode``
    methods that choose the next token greedily in the engine and return the logits beside it
    (``export_causal_lm(sampling=Sampling(logits=True))``: one program for both ways of choosing), lowered with
    ``zero_copy_outputs`` (the token written into the caller's device buffer) and decode as a CUDA graph; the prompt
    and eager's greedy tokens after it."""
    import check_models
    import torch

    import et_tensorrt
    from et_tensorrt.llm import export_causal_lm
    from et_tensorrt.llm.sampling import Sampling
    from et_tensorrt.testing import decoders

    t0 = time.perf_counter()
    lm = export_causal_lm(
        decoders.executorch_llama(dynamic=True).eager,
        methods="prefill_decode",
        sampling=Sampling(logits=True),
        bos_id=0,
        eos_ids=[1],
    )
    pte = et_tensorrt.lower(
        lm.programs, constant_methods=lm.constant_methods, zero_copy_outputs=True, cuda_graph="decode"
    )
    (out / "next_token.pte").write_bytes(pte)
    eager, prompt = decoders.executorch_llama(dynamic=True).eager, check_models.DECODE_TOKENS[:4]
    tokens, start, expected = prompt, 0, []
    with torch.no_grad():
        for _ in range(NEXT_TOKEN_STEPS + 1):
            logits = eager(torch.tensor([tokens]), {"input_pos": torch.tensor([start])})
            start += len(tokens)
            expected.append(int(logits.reshape(-1, logits.shape[-1])[-1].argmax()))
            tokens = expected[-1:]
    log(f"lowered next_token: {len(pte) / transport.MiB:.2f} MiB, {time.perf_counter() - t0:.1f} s")
    return {"pte": "next_token.pte", "prompt": prompt, "expected": expected}


def periodic_(model, period: int = 1024) -> None:
    """Random weights that compress: each tensor repeats a random tile of ``period`` values of its own (norm weights
    stay 1). A decode step still reads every byte, and no two tensors hold the same bytes (named data would store
    them once, and an engine might too); the .ptd (engine and weights: gigabytes for the 1B shape) gzips to a few
    MiB, so it fits the device calls."""
    import torch

    generator = torch.Generator().manual_seed(0)
    for name, p in model.named_parameters():
        if "norm" in name:
            continue
        tile = torch.randn(period, generator=generator) * 0.02
        p.data.copy_(tile.repeat(p.numel() // period + 1)[: p.numel()].view_as(p).to(p.dtype))


def lower_roofline(out: Path, shape_name: str, quantize: str = "") -> dict:
    """Issue 34: ExecuTorch's llama Transformer shaped like ``check_models.ROOFLINE_SHAPES[shape_name]`` in bf16
    (``quantize``: its linear layers int4 weight-only, group 32), random periodic weights; its one-token decode
    lowered with ``named_data="ptd"`` and ``cuda_graph``; the .ptd gzipped; the logits of the first tokens computed
    here in bf16."""
    import gzip
    import shutil

    import check_models
    import torch
    from executorch.examples.models.llama.llama_transformer import construct_transformer
    from executorch.examples.models.llama.model_args import ModelArgs

    import et_tensorrt

    t0 = time.perf_counter()
    shape = check_models.ROOFLINE_SHAPES[shape_name]
    context = check_models.ROOFLINE_CONTEXT
    args = ModelArgs(**shape, max_seq_len=context, max_context_len=context, max_batch_size=1, use_kv_cache=True)
    model = construct_transformer(args).eval().requires_grad_(False).to(torch.bfloat16)
    periodic_(model)
    if quantize:
        model = quantized(model, quantize)
    step = (torch.tensor([[check_models.ROOFLINE_CHECKED[0]]]), {"input_pos": torch.tensor([0])})
    program = torch.export.export(model, step, strict=False)  # before eager runs: the caches start empty
    name = f"roofline_{'int4' if quantize else 'bf16'}"
    saved = et_tensorrt.save(out / f"{name}.pte", program, min_block_size=1, named_data="ptd", cuda_graph=True)
    del program
    expected = []
    with torch.no_grad():
        for position, token in enumerate(check_models.ROOFLINE_CHECKED):
            logits = model(torch.tensor([[token]]), {"input_pos": torch.tensor([position])})
            expected.append((logits[0] if isinstance(logits, tuple) else logits).float())
    ptd = out / f"{name}.ptd"
    with open(ptd, "rb") as src, gzip.open(out / f"{name}.ptd.gz", "wb", compresslevel=6) as dst:
        shutil.copyfileobj(src, dst, 16 * 2**20)
    ptd_bytes = ptd.stat().st_size
    ptd.unlink()
    gz = (out / f"{name}.ptd.gz").stat().st_size
    log(
        f"lowered {name} ({shape_name}): .pte {saved.pte_bytes / transport.MiB:.1f} MiB, .ptd "
        f"{ptd_bytes / transport.MiB:.0f} MiB gzipped to {gz / transport.MiB:.1f} MiB, {time.perf_counter() - t0:.0f} s"
    )
    return {
        "pte": f"{name}.pte",
        "ptd_gz": f"{name}.ptd.gz",
        "ptd_bytes": ptd_bytes,
        "shape": shape_name,
        "weights": "int4 weight-only (group 32), bf16 head" if quantize else "bf16",
        "bytes_per_token": check_models.bytes_per_token(shape, 4 if quantize else 16),
        "expected": expected,
    }


# -------------------------------------------------------------------------------------------- main
def versions() -> dict:
    import torch

    import et_tensorrt
    from et_tensorrt import trt

    if trt.flavour() != "tensorrt_rtx":
        raise SystemExit(f"the engines would be built by {trt.flavour()}; the device machine gets TensorRT-RTX only")
    try:
        commit = git("rev-parse", "HEAD").strip()
        dirty = bool(git("status", "--porcelain", "--untracked-files=no").strip())
    except (subprocess.CalledProcessError, FileNotFoundError):
        commit, dirty = "unknown", True
    return {
        "et_tensorrt_commit": commit + ("+dirty" if dirty else ""),
        "et_tensorrt_from": os.path.dirname(et_tensorrt.__file__),
        "torch_lowered_with": torch.__version__,
        "python_lowered_with": sys.version.split()[0],
        "executorch": importlib.metadata.version("executorch"),
        "tensorrt_rtx": trt.version(),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument(
        "--anywhere", action="store_true", help="allow a folder that is not an ignored part of the checkout"
    )
    ap.add_argument(
        "--roofline-shape",
        default="llama-3.2-1b",
        choices=("llama-3.2-1b", "tiny"),
        help="the decoder of the roofline rows (check_models.ROOFLINE_SHAPES); tiny: --local, where they skip",
    )
    args = ap.parse_args()
    out = args.dir.resolve()
    if not args.anywhere:
        try:
            rel = out.relative_to(ROOT)
        except ValueError:
            raise SystemExit(
                f"{out} is outside {ROOT}: a device call carries only folders inside the checkout"
            ) from None
        probe = str(rel / "call1")
        if subprocess.run(["git", "check-ignore", "-q", probe], cwd=ROOT, check=False).returncode != 0:
            raise SystemExit(
                f"{rel}/ is not ignored by git: it would travel with every call. Add '/{rel}/' to "
                ".git/info/exclude (or use the default .gpucheck, which .gitignore lists)"
            )
    t0 = time.perf_counter()
    work = out / "work"
    work.mkdir(parents=True, exist_ok=True)
    ver = versions()
    log(f"versions: {ver}")

    downloads = out / "downloads"
    et_wheel = pip_download(f"executorch=={ver['executorch']}", downloads)
    bindings = pip_download(f"tensorrt_rtx_{TRT_VARIANT}_bindings=={ver['tensorrt_rtx']}", downloads)
    libs = pip_download(f"tensorrt_rtx_{TRT_VARIANT}_libs=={ver['tensorrt_rtx']}", downloads)
    log(f"wheels: {et_wheel.name}, {bindings.name}, {libs.name}")

    payload = {
        "programs.tar": lower_programs(work, args.roofline_shape),
        f"executorch-runtime-{ver['executorch']}-{PYTHON_TAG}.zip": trim_executorch(
            et_wheel, work / f"executorch-runtime-{ver['executorch']}-{PYTHON_TAG}.zip"
        ),
        f"tensorrt_rtx-{ver['tensorrt_rtx']}-python.tar": tensorrt_python_package(
            ver["tensorrt_rtx"], work / f"tensorrt_rtx-{ver['tensorrt_rtx']}-python.tar"
        ),
        bindings.name: bindings,
        libs.name: libs,
    }
    travelling = [p for p in travelling_files() if not (ROOT / p).resolve().is_relative_to(out)]
    tree = tree_bytes(travelling)
    calls = transport.plan_calls([(name, path.stat().st_size) for name, path in payload.items()], tree)
    manifest = transport.write_calls(
        out,
        payload,
        calls,
        {
            "roles": {
                "programs": "programs.tar",
                "executorch": next(n for n in payload if n.startswith("executorch-runtime-")),
                "tensorrt_python": next(n for n in payload if n.endswith("-python.tar")),
                "tensorrt_bindings": bindings.name,
                "tensorrt_libs": libs.name,
            },
            "sources": sources(travelling),
            "tree_bytes": tree,
            "call_limit_bytes": transport.CALL_LIMIT,
            "versions": ver,
        },
    )
    rel = os.path.relpath(out, ROOT)
    log(
        f"bundle {manifest['bundle_id']} in {time.perf_counter() - t0:.0f} s; working tree {tree / transport.MiB:.2f} "
        f"MiB travels with every call"
    )
    worst = 0.0
    for i in range(len(calls)):
        size = (tree + transport.folder_bytes(out / f"call{i + 1}")) / transport.MiB
        worst = max(worst, size)
        print(f'call {i + 1}: {size:.1f} MiB   (carry: ["{rel}/call{i + 1}"])')
    if worst > transport.CALL_LIMIT / transport.MiB:
        raise SystemExit(f"a call is {worst:.1f} MiB, over the {transport.CALL_LIMIT / transport.MiB:.0f} MiB plan")
    (out / "calls.txt").write_text(
        "".join(f"call {i + 1}: bash scripts/gpu_check.sh --call {i + 1} {rel}\n" for i in range(len(calls)))
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
