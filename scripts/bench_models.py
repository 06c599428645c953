"""Model zoo: real models (random weights, nothing downloaded) through et_tensorrt and XNNPACK, side by side.

For every row (a model with static or dynamic batch/sequence sizes) and backend:

  partitions   delegate partitions in the lowered program
  delegated    delegated compute nodes / all compute nodes of the edge program (plumbing such as getitem and
               size queries is not counted)
  host         the compute ops left to the host (op x count)
  lower s      wall seconds of the whole lowering (export excluded); ours = et_tensorrt.lower with
               validate=True (onnxruntime checks every partition's ONNX) and a cold engine cache
  engine MB    TensorRT engine bytes in our blobs (TensorRT-RTX builds engines without a GPU)
  recipe MB    RECIPE bytes in our blobs (device_build: the weightless ONNX graph + initializer recipes), with
               the share of them stored raw (initializers no recipe rebuilds from WEIGHTS) in parentheses
  pte MB       the .pte
  max err      max |out - eager| over the outputs, at the example sizes (and, for dynamic rows, at a
               second size inside the range); ours runs through et_tensorrt.Runner (on a machine without
               a GPU every delegate runs its embedded program with PyTorch, so this checks lowering, the
               blob and the runtime, not the engine's numbers)
  onnx err     largest validation error onnxruntime recorded for our partitions' ONNX (the engine's source)
  explain      whether explain() on the torch.export program predicted lower's partitions exactly

    python scripts/bench_models.py                       # every row, both backends
    python scripts/bench_models.py --rows bert,gpt2      # rows whose name starts with one of these
    python scripts/bench_models.py --static-only --backends et_tensorrt --json out.json

Adding a row: write a builder returning a ``Zoo`` (model, example inputs, which input dims are "batch" /
"seq") and add ``Row(name, builder, dynamic=("batch",))`` entries to ``ROWS``.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import logging
import os
import sys
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from bench_common import fmt, xnnpack_edge  # this folder (the script's own) is on sys.path

HERE = os.path.dirname(os.path.abspath(__file__))


# ---------------------------------------------------------------------------------------------- the zoo


@dataclass
class Zoo:
    model: torch.nn.Module
    inputs: tuple
    # axis label ("batch", "seq") -> the (input index, dim) positions that share it
    axes: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    make_inputs: Callable[[dict[str, int]], tuple] | None = None  # inputs at other axis sizes (dynamic rows)


@dataclass(frozen=True)
class Row:
    name: str
    build: Callable[[], Zoo]
    dynamic: tuple[str, ...] = ()  # axes exported as dynamic dims
    max_size: int = 16  # upper bound of every dynamic dim

    @property
    def shapes(self) -> str:
        return "static" if not self.dynamic else "dynamic " + "+".join(self.dynamic)


def _import_torchvision():
    # The CUDA torchvision wheel's C++ ops do not load beside a CPU torch; declare their schemas first
    # (transformers imports torchvision too).
    import importlib

    sys.path.insert(0, os.path.join(HERE, "suite_plugins"))
    importlib.import_module("torchvision_op_schemas")  # before torchvision (an import sorter must not swap them)
    return importlib.import_module("torchvision")


def _before_transformers() -> None:
    """transformers imports torchvision when it is installed: declare its op schemas first. Without
    torchvision the text models need nothing."""
    import importlib.util

    if importlib.util.find_spec("torchvision") is not None:
        _import_torchvision()


def _estimate_batch_norm(model: torch.nn.Module, shape, batches: int = 4) -> torch.nn.Module:
    """Random init leaves BatchNorm at mean 0 / var 1, and deep CNNs then output ~1e-9: estimate the
    statistics from a few random batches so outputs (and parity) mean something."""
    if any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in model.modules()):
        model.train()
        for m in model.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                m.reset_running_stats()
                m.momentum = None  # cumulative average
        with torch.no_grad():
            for _ in range(batches):
                model(torch.randn(*shape))
    return model.eval()


class _FirstOutput(torch.nn.Module):
    """A model returning a dict / ModelOutput, reduced to the tensor that matters."""

    def __init__(self, model: torch.nn.Module, key: str, **call_kwargs):
        super().__init__()
        self.model, self.key, self.call_kwargs = model, key, call_kwargs

    def forward(self, *args):
        out = self.model(*args, **self.call_kwargs)
        return out[self.key]


def _no_zero_layers(model: torch.nn.Module) -> torch.nn.Module:
    """Random init, but no all-zero weight (ViT's head starts at zero: its output would be 0 for any
    input and parity meaningless)."""
    with torch.no_grad():
        for m in model.modules():
            weight = getattr(m, "weight", None)
            if isinstance(weight, torch.nn.Parameter) and weight.dim() >= 2 and not weight.any():
                torch.nn.init.normal_(weight, std=0.02)
    return model


def _vision(name: str, size: int = 224, **kwargs) -> Callable[[], Zoo]:
    def build() -> Zoo:
        tv = _import_torchvision()
        torch.manual_seed(0)
        factory = getattr(tv.models, name, None) or getattr(tv.models.segmentation, name)
        model = _no_zero_layers(factory(weights=None, **kwargs))
        model = _estimate_batch_norm(model, (4, 3, size, size))
        if name.startswith(("deeplab", "fcn", "lraspp")):
            model = _FirstOutput(model, "out").eval()
        x = torch.randn(2, 3, size, size)
        return Zoo(model, (x,), {"batch": [(0, 0)]}, lambda s: (torch.randn(s.get("batch", 2), 3, size, size),))

    return build


TINY = dict(vocab=128, hidden=32, layers=2, heads=2, ffn=64)


class _HFWrapper(torch.nn.Module):
    def __init__(self, model: torch.nn.Module, names: tuple[str, ...], key: str, **fixed):
        super().__init__()
        self.model, self.names, self.key, self.fixed = model, names, key, fixed

    def forward(self, *args):
        return getattr(self.model(**dict(zip(self.names, args)), **self.fixed), self.key)


def _token_zoo(model, names, key, batch=2, seq=8, mask=False, **fixed) -> Zoo:
    def make(sizes: dict) -> tuple:
        b, s = sizes.get("batch", batch), sizes.get("seq", seq)
        ids = [torch.randint(0, TINY["vocab"], (b, s)) for _ in names if _ != "attention_mask"]
        if mask:  # a padded batch: the last positions of the first sequence are masked out
            m = torch.ones(b, s, dtype=torch.int64)
            m[0, s - 2 :] = 0
            ids.insert(names.index("attention_mask"), m)
        return tuple(ids)

    wrapper = _HFWrapper(model.eval(), names, key, **fixed).eval()
    inputs = make({})
    axes = {"batch": [(i, 0) for i in range(len(names))], "seq": [(i, 1) for i in range(len(names))]}
    return Zoo(wrapper, inputs, axes, make)


# The tiny transformer models (random init, nothing downloaded); scripts/bench_dynamic.py builds its rows
# from these too.


def bert_model():
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    t = TINY
    cfg = BertConfig(
        vocab_size=t["vocab"],
        hidden_size=t["hidden"],
        num_hidden_layers=t["layers"],
        num_attention_heads=t["heads"],
        intermediate_size=t["ffn"],
        max_position_embeddings=64,
    )
    return BertModel(cfg)


def gpt2_model():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    t = TINY
    cfg = GPT2Config(
        vocab_size=t["vocab"],
        n_embd=t["hidden"],
        n_layer=t["layers"],
        n_head=t["heads"],
        n_positions=64,
        bos_token_id=0,
        eos_token_id=0,
    )
    # torch 2.13 + transformers 5: GPT-2's sdpa attention fails in run_decompositions for every backend.
    return GPT2LMHeadModel._from_config(cfg, attn_implementation="eager")


def t5_model():
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(0)
    t = TINY
    cfg = T5Config(
        vocab_size=t["vocab"],
        d_model=t["hidden"],
        d_kv=t["hidden"] // t["heads"],
        d_ff=t["ffn"],
        num_layers=t["layers"],
        num_heads=t["heads"],
        decoder_start_token_id=0,
    )
    return T5ForConditionalGeneration(cfg)


def llama_model():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    t = TINY
    cfg = LlamaConfig(
        vocab_size=t["vocab"],
        hidden_size=t["hidden"],
        intermediate_size=t["ffn"],
        num_hidden_layers=t["layers"],
        num_attention_heads=t["heads"],
        num_key_value_heads=1,
        max_position_embeddings=64,
    )
    return LlamaForCausalLM(cfg)


def _bert() -> Zoo:
    _before_transformers()
    return _token_zoo(bert_model(), ("input_ids", "attention_mask"), "last_hidden_state", mask=True)


def _gpt2() -> Zoo:
    _before_transformers()
    return _token_zoo(gpt2_model(), ("input_ids",), "logits", use_cache=False)


def _t5() -> Zoo:
    _before_transformers()
    return _token_zoo(t5_model(), ("input_ids", "decoder_input_ids"), "logits", use_cache=False)


def _llama() -> Zoo:
    _before_transformers()
    return _token_zoo(llama_model(), ("input_ids",), "logits", use_cache=False)


ROWS: list[Row] = [
    Row("resnet18", _vision("resnet18")),
    Row("mobilenet_v3_small", _vision("mobilenet_v3_small")),
    Row("efficientnet_b0", _vision("efficientnet_b0")),
    Row("vit_b_16", _vision("vit_b_16")),
    Row("deeplabv3_mobilenet_v3_large", _vision("deeplabv3_mobilenet_v3_large", 128, weights_backbone=None)),
    Row("bert", _bert),
    Row("gpt2", _gpt2),
    Row("t5", _t5),
    Row("llama", _llama),
    Row("resnet18", _vision("resnet18"), dynamic=("batch",)),
    Row("bert", _bert, dynamic=("batch", "seq")),
    Row("gpt2", _gpt2, dynamic=("seq",)),
    Row("t5", _t5, dynamic=("seq",)),
    Row("llama", _llama, dynamic=("seq",)),
]


def dynamic_shapes(zoo: Zoo, row: Row):
    if not row.dynamic:
        return None
    specs: list[dict] = [{} for _ in zoo.inputs]
    for axis in row.dynamic:
        dim = torch.export.Dim(axis, min=1, max=row.max_size)
        for i, d in zoo.axes[axis]:
            specs[i][d] = dim
    specs = tuple(spec or None for spec in specs)
    parameters = inspect.signature(zoo.model.forward).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters):
        return (specs,)  # forward(*args): one spec for the tuple of inputs
    return specs


def parity_inputs(zoo: Zoo, row: Row) -> list[tuple]:
    """The example inputs, and for a dynamic row inputs at other sizes inside the range."""
    runs = [zoo.inputs]
    if row.dynamic and zoo.make_inputs is not None:
        runs.append(zoo.make_inputs({axis: 3 for axis in row.dynamic}))
    return runs


# ------------------------------------------------------------------------------------------ measuring

# Plumbing that computes nothing (not counted as compute nodes, not reported as kept on the host).
_PLUMBING = {
    "operator.getitem",
    "aten.sym_size.int",
    "_operator.mul",
    "_operator.add",
    "_operator.sub",
    "_operator.floordiv",
    "aten._assert_tensor_metadata.default",
    "executorch_call_delegate",
}


PARTITIONER_OPTIONS = ("min_block_size", "torch_executed_ops", "require_full_compilation", "target_device")


@dataclass
class Result:
    row: str
    shapes: str
    backend: str
    partitions: int | None = None
    delegated: int = 0
    compute: int = 0
    host: dict[str, int] = field(default_factory=dict)
    lower_s: float | None = None
    onnx_s: float | None = None
    build_s: float | None = None
    engine_mb: float | None = None
    recipe_mb: float | None = None
    recipe_raw_mb: float | None = None
    pte_mb: float | None = None
    max_err: float | None = None
    out_scale: float | None = None
    onnx_err: float | None = None
    explain_agrees: bool | None = None
    explain_partitions: int | None = None
    error: str = ""

    @property
    def ratio(self) -> float | None:
        return self.delegated / self.compute if self.compute else None


def _outputs(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _outputs(v)]
    return []


def _max_err(got, want) -> tuple[float, float]:
    got, want = _outputs(got), _outputs(want)
    if len(got) != len(want):
        raise AssertionError(f"{len(got)} outputs, eager {len(want)}")
    err = scale = 0.0
    for g, w in zip(got, want):
        if g.shape != w.shape:
            raise AssertionError(f"output shape {tuple(g.shape)}, eager {tuple(w.shape)}")
        err = max(err, float((g.double() - w.double()).abs().max()) if w.numel() else 0.0)
        scale = max(scale, float(w.double().abs().max()) if w.numel() else 0.0)
    return err, scale


def _eager(zoo: Zoo, inputs):
    with torch.no_grad():
        return zoo.model(*inputs)


def _op(target) -> str:
    from et_tensorrt.partition.supported_ops import op_name

    return op_name(target)


def _count_edge_program(gm) -> tuple[int, int, Counter]:
    """(delegated compute nodes, all compute nodes, host ops) of a lowered edge program."""
    from executorch.exir.lowered_backend_module import get_lowered_submodules

    delegated = 0
    for _name, lowered, _node in get_lowered_submodules(gm):
        delegated += sum(
            1 for n in lowered.original_module.graph.nodes if n.op == "call_function" and _op(n.target) not in _PLUMBING
        )
    host = Counter(
        _op(n.target)
        for n in gm.graph.nodes
        if n.op == "call_function"
        and _op(n.target) not in _PLUMBING
        and "executorch_call_delegate" not in str(n.target)
    )
    return delegated, delegated + sum(host.values()), host


def run_ours(row: Row, zoo: Zoo, ep, options: dict) -> Result:
    from et_tensorrt import Runner, explain, lower
    from et_tensorrt.inspection import inspect_bytes

    res = Result(row.name, row.shapes, "et_tensorrt")
    predicted = explain(ep, **{k: v for k, v in options.items() if k in PARTITIONER_OPTIONS})
    res.explain_partitions = len(predicted.partitions)
    start = time.perf_counter()
    pte = lower(ep, **options)
    res.lower_s = time.perf_counter() - start
    report = lower.last_report
    res.partitions = len(report.partitions)
    res.explain_agrees = predicted.partitions == report.partitions and predicted.host_nodes == report.host_nodes
    computed = [d for d in report.nodes if d.op not in _PLUMBING]
    res.compute = len(computed)
    res.delegated = sum(d.partition is not None for d in computed)
    res.host = dict(Counter(d.op for d in computed if d.partition is None))
    ours = [d for d in inspect_bytes(pte).method("forward").delegates if d.ours]
    res.engine_mb = sum(len(d.blob.engine or b"") for d in ours) / 2**20
    recipes = [d.blob.recipe for d in ours if d.blob.recipe is not None]
    res.recipe_mb = sum(r.nbytes for r in recipes) / 2**20
    res.recipe_raw_mb = sum(r.raw_bytes for r in recipes) / 2**20
    res.onnx_s = sum(float(d.blob.metadata.get("onnx_seconds", 0.0)) for d in ours)
    res.build_s = sum(float(d.blob.metadata.get("build_seconds", 0.0)) for d in ours)
    errors = [e for d in ours for e in (d.blob.metadata.get("validation_max_abs_error") or {}).values()]
    res.onnx_err = max(errors) if errors else None
    unvalidated = [d.index for d in ours if "validation_max_abs_error" not in d.blob.metadata]
    if unvalidated:
        res.error = f"partition(s) {unvalidated} not validated"
    res.pte_mb = len(pte) / 2**20
    runner = Runner(pte)
    for inputs in parity_inputs(zoo, row):
        err, scale = _max_err(runner.run(list(inputs)), _eager(zoo, inputs))
        res.max_err = max(res.max_err or 0.0, err)
        res.out_scale = max(res.out_scale or 0.0, scale)
    return res


def run_xnnpack(row: Row, zoo: Zoo, ep) -> Result:
    from executorch.exir.lowered_backend_module import get_lowered_submodules
    from executorch.runtime import Runtime

    res = Result(row.name, row.shapes, "xnnpack")
    start = time.perf_counter()
    edge = xnnpack_edge(ep)
    gm = edge.exported_program().graph_module
    res.partitions = len(get_lowered_submodules(gm))
    res.delegated, res.compute, host = _count_edge_program(gm)
    res.host = dict(host)
    pte = edge.to_executorch().buffer
    res.lower_s = time.perf_counter() - start
    res.pte_mb = len(pte) / 2**20
    method = Runtime.get().load_program(pte).load_method("forward")
    for inputs in parity_inputs(zoo, row):
        err, scale = _max_err(method.execute(list(inputs)), _eager(zoo, inputs))
        res.max_err = max(res.max_err or 0.0, err)
        res.out_scale = max(res.out_scale or 0.0, scale)
    return res


def run_row(row: Row, backends: tuple[str, ...], options: dict) -> list[Result]:
    results = []
    try:
        zoo = row.build()
        ep = torch.export.export(zoo.model, zoo.inputs, dynamic_shapes=dynamic_shapes(zoo, row), strict=False)
    except Exception as exc:  # noqa: BLE001  (a row that cannot export is reported, the others still run)
        return [Result(row.name, row.shapes, b, error=f"export: {type(exc).__name__}: {exc}"[:300]) for b in backends]
    for backend in backends:
        try:
            results.append(run_ours(row, zoo, ep, options) if backend == "et_tensorrt" else run_xnnpack(row, zoo, ep))
        except Exception as exc:  # noqa: BLE001
            results.append(Result(row.name, row.shapes, backend, error=f"{type(exc).__name__}: {exc}"[:300]))
    return results


# ------------------------------------------------------------------------------------------ reporting


def markdown(results: list[Result]) -> str:
    head = (
        "| model | shapes | backend | partitions | delegated | lower s | engine MB | recipe MB (raw) | pte MB "
        "| max err (eager max) | onnx err | explain | host ops |"
    )
    lines = [head, "|" + "|".join(["---"] * 13) + "|"]
    for r in results:
        ratio = f"{r.delegated}/{r.compute} ({r.ratio:.3f})" if r.ratio is not None else "-"
        host = ", ".join(f"{op.removeprefix('aten.')} x{n}" for op, n in sorted(r.host.items())) or "-"
        if r.error:
            host = f"{host}; **{r.error}**" if r.host else f"**{r.error}**"
        explain = "-" if r.explain_agrees is None else ("yes" if r.explain_agrees else f"no ({r.explain_partitions})")
        err = "-" if r.max_err is None else f"{r.max_err:.2g} ({r.out_scale:.2g})"
        lines.append(
            f"| {r.row} | {r.shapes} | {r.backend} | {fmt(r.partitions, 'd')} | {ratio} | {fmt(r.lower_s, '.1f')} "
            f"| {fmt(r.engine_mb)} | {fmt(r.recipe_mb, '.3f')} ({fmt(r.recipe_raw_mb, '.3f')}) | {fmt(r.pte_mb)} "
            f"| {err} | {fmt(r.onnx_err, '.2g')} | {explain} | {host} |"
        )
    return "\n".join(lines)


def select(names: str | None, static_only: bool = False, dynamic_only: bool = False) -> list[Row]:
    rows = ROWS
    if names:
        wanted = [n.strip() for n in names.split(",") if n.strip()]
        rows = [r for r in rows if any(r.name == w or f"{r.name}:{r.shapes}".startswith(w) for w in wanted)]
        if not rows:
            raise SystemExit(f"no row matches {names!r}; rows: {sorted({r.name for r in ROWS})}")
    if static_only:
        rows = [r for r in rows if not r.dynamic]
    if dynamic_only:
        rows = [r for r in rows if r.dynamic]
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", help="comma-separated row names (e.g. bert,resnet18)")
    parser.add_argument("--static-only", action="store_true")
    parser.add_argument("--dynamic-only", action="store_true")
    parser.add_argument("--backends", default="et_tensorrt,xnnpack")
    parser.add_argument("--json", help="also write the results as JSON to this file")
    parser.add_argument("--min-block-size", type=int, default=None, help="et_tensorrt partitioner option")
    args = parser.parse_args(argv)

    os.environ.setdefault("ET_TENSORRT_CACHE_DIR", tempfile.mkdtemp(prefix="et_trt_zoo_cache_"))  # cold builds
    logging.getLogger("et_tensorrt").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    backends = tuple(b.strip() for b in args.backends.split(",") if b.strip())
    options: dict = {"validate": True}
    if args.min_block_size is not None:
        options["min_block_size"] = args.min_block_size

    import executorch.version

    import et_tensorrt  # noqa: F401  (registers the runtime backend)
    from et_tensorrt import trt

    versions = (
        f"torch {torch.__version__}, executorch {executorch.version.__version__}, "
        f"{trt.flavour()} {trt.version()}, {os.cpu_count()} CPU(s), CUDA "
        f"{'yes' if torch.cuda.is_available() else 'no'}"
    )
    results: list[Result] = []
    for row in select(args.rows, args.static_only, args.dynamic_only):
        start = time.perf_counter()
        row_results = run_row(row, backends, options)
        results += row_results
        if args.json:  # after every row: a long run that dies keeps what it measured
            write_json(args.json, versions, results)
        for r in row_results:
            print(
                f"# {r.row} {r.shapes} {r.backend}: partitions {r.partitions}, delegated {r.delegated}/{r.compute}, "
                f"lower {fmt(r.lower_s, '.1f')} s, err {fmt(r.max_err, '.2g')}, host {r.host} {r.error}",
                file=sys.stderr,
                flush=True,
            )
        print(f"# {row.name} {row.shapes}: {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)

    print(versions)
    print(markdown(results))
    return 1 if any(r.error for r in results) else 0


def write_json(path: str, versions: str, results: list[Result]) -> None:
    with open(path, "w") as f:
        json.dump(
            {"versions": versions, "results": [dataclasses.asdict(r) | {"ratio": r.ratio} for r in results]},
            f,
            indent=1,
        )


if __name__ == "__main__":
    sys.exit(main())
