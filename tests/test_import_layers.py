"""The package's layers (docs/architecture.md, "Layers"): every import of et_tensorrt's own modules, function-local
ones included, runs down the layer order, and no files import each other in a circle.

Parsed with ``ast`` (nothing is imported). ``python tests/test_import_layers.py`` prints the counts: the largest
circle, the imports that run against the layers, the runtime's and the format layer's imports of the backend, and
the function-local imports of the package's own modules.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "et_tensorrt"
SCRIPTS = PACKAGE.parent / "scripts"  # run as files: they import each other by bare name (their folder on sys.path)

# Layer -> the layers it may import (its own included). Bottom first.
ALLOWED = {
    "core": {"core"},
    "ops": {"core", "ops"},
    "format": {"core", "format"},
    "build": {"core", "ops", "format", "build"},
    "program": {"core", "ops", "format", "build", "program"},
    "backend": {"core", "ops", "format", "build", "program", "backend"},
    "runtime": {"core", "format", "build", "program", "runtime"},
    "partition": {"core", "ops", "format", "build", "program", "backend", "partition"},
    "api": {"core", "ops", "format", "build", "program", "backend", "runtime", "partition", "api"},
    "tools": {"core", "ops", "format", "build", "program", "backend", "runtime", "partition", "api", "tools"},
}

# Module (or package: every module under it) -> layer; the longest match decides.
LAYER_OF = {
    "et_tensorrt": "core",  # the package's __init__ (the native module, descriptors, errors; the rest lazily)
    "et_tensorrt._C": "core",
    "et_tensorrt._quiet": "core",
    "et_tensorrt._text": "core",
    "et_tensorrt.errors": "core",
    "et_tensorrt.descriptors": "core",
    "et_tensorrt.trt": "core",
    "et_tensorrt.parity": "core",
    "et_tensorrt.compile_specs": "core",
    "et_tensorrt.progress": "core",
    # What the delegate knows of aten ops, read by the partitioner, the build and the embedded-program checker.
    "et_tensorrt.sizes": "ops",
    "et_tensorrt.partition.report": "ops",
    "et_tensorrt.partition.supported_ops": "ops",
    "et_tensorrt.partition.argument_limits": "ops",
    "et_tensorrt.quantization.qdq": "ops",
    "et_tensorrt.format": "format",
    "et_tensorrt.builder": "build",
    "et_tensorrt.embedded_program": "program",
    "et_tensorrt.backend": "backend",
    "et_tensorrt.runtime": "runtime",
    "et_tensorrt.partition": "partition",
    "et_tensorrt.quantization": "partition",
    "et_tensorrt.lowering": "api",
    "et_tensorrt.llm": "api",
    "et_tensorrt.inspection": "api",
    "et_tensorrt.examples": "api",
    "et_tensorrt.testing": "tools",
    "et_tensorrt.conformance": "tools",
    "et_tensorrt.cli": "tools",
    "et_tensorrt.__main__": "tools",
}


@dataclass(frozen=True)
class Import:
    source: str  # importing module
    target: str  # imported module of the package
    line: int
    local: bool  # inside a function
    type_only: bool  # under ``if TYPE_CHECKING:`` (never runs)


def modules(package: Path = PACKAGE) -> dict[str, Path]:
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    out["et_tensorrt._C"] = package / "_C"  # the native modules: the runtime (links torch) and the blob reader (not)
    out["et_tensorrt.format._reader"] = package / "format" / "_reader"
    return out


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports_of(path: Path, name: str, targets_of) -> list[Import]:
    """Every import statement of the module ``name`` at ``path`` that ``targets_of(statement)`` resolves to other
    modules (a set), one Import per target, with whether it sits in a function and under ``TYPE_CHECKING``."""
    found = []

    def visit(node, local, type_only):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                for target in sorted(targets_of(child) - {name}):
                    found.append(Import(name, target, child.lineno, local, type_only))
            visit(
                child,
                local or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef),
                type_only or (isinstance(child, ast.If) and _type_checking(child)),
            )

    visit(ast.parse(path.read_text(), str(path)), False, False)
    return found


def imports(package: Path = PACKAGE) -> list[Import]:
    """Every import of the package's own modules, one per imported module per statement."""
    mods = modules(package)

    def resolve(name: str) -> str:
        while name not in mods:
            name = name.rpartition(".")[0]
        return name

    found = []
    for name, path in mods.items():
        if path.suffix != ".py":
            continue
        here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]

        def targets_of(statement, here=here):
            if isinstance(statement, ast.Import):
                names = [a.name for a in statement.names]
            else:
                base = ".".join(here[: len(here) - statement.level + 1]) if statement.level else ""
                module = ".".join(p for p in (base, statement.module or "") if p)
                names = [f"{module}.{a.name}" for a in statement.names]
            return {resolve(t) for t in names if t.split(".")[0] == "et_tensorrt"}

        found += _imports_of(path, name, targets_of)
    return found


def script_imports(scripts: Path = SCRIPTS) -> list[Import]:
    """Every import of one script by another (``import fuzz_children``, ``from fuzz_seeds import ...``)."""
    names = {path.stem for path in scripts.glob("*.py")}

    def targets_of(statement):
        if isinstance(statement, ast.Import):
            return {a.name.split(".")[0] for a in statement.names} & names
        if not statement.level and statement.module:
            return {statement.module.split(".")[0]} & names
        return set()

    return [i for path in sorted(scripts.glob("*.py")) for i in _imports_of(path, path.stem, targets_of)]


def layer(module: str) -> str:
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in LAYER_OF:
            return LAYER_OF[".".join(parts[:n])]
    raise KeyError(f"{module} has no layer: add it to LAYER_OF")


def circles(found: list[Import]) -> list[list[str]]:
    """The strongly connected components of more than one module. TYPE_CHECKING imports count: two modules that need
    each other's names, if only to annotate, are one concern split in two (or a third module is missing)."""
    graph = defaultdict(set)
    for i in found:
        graph[i.source].add(i.target)
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def connect(v):  # Tarjan
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return out


def against_layers(found: list[Import]) -> list[Import]:
    return [i for i in found if layer(i.target) not in ALLOWED[layer(i.source)]]


def test_every_module_has_a_layer():
    for name in modules():
        assert layer(name) in ALLOWED


def test_no_import_circle():
    assert circles(imports()) == []


def test_no_import_circle_among_scripts():
    """What two scripts share lives in a third (scripts/fuzz_seeds.py for fuzz_pte.py and fuzz_ptd.py), function-local
    imports included: a circle works only while every import of it stays inside a function."""
    assert circles(script_imports()) == []


def test_imports_run_down_the_layers():
    bad = [
        f"{i.source}:{i.line} ({layer(i.source)}) imports {i.target} ({layer(i.target)})"
        for i in against_layers(imports())
    ]
    assert bad == [], "imports against the layers (docs/architecture.md, 'Layers'):\n" + "\n".join(bad)


# Inside llm/, shaped as ExecuTorch's extension/llm: the exporters and the drivers import what both read (the modules
# at llm/'s top: constants, sampling, media), never each other; those shared modules import neither side. Only
# llm/__init__.py (the public names) reaches into both.
LLM_SIDES = ("et_tensorrt.llm.export", "et_tensorrt.llm.runner")


def llm_side(module: str) -> str | None:
    """``et_tensorrt.llm.export``, ``et_tensorrt.llm.runner``, ``shared`` (a module at llm/'s top), or None (outside
    llm/, or llm/__init__.py)."""
    if not module.startswith("et_tensorrt.llm."):
        return None
    return next((side for side in LLM_SIDES if module == side or module.startswith(side + ".")), "shared")


def across_llm_sides(found: list[Import]) -> list[Import]:
    bad = []
    for i in found:
        source, target = llm_side(i.source), llm_side(i.target)
        if target in LLM_SIDES and source is not None and source != target:
            bad.append(i)  # a driver importing an exporter, an exporter a driver, or a shared module either
    return bad


def test_llm_exporters_and_drivers_import_only_what_they_share():
    bad = [f"{i.source}:{i.line} imports {i.target}" for i in across_llm_sides(imports())]
    assert bad == [], "llm/export and llm/runner import each other (docs/architecture.md, 'Layers'):\n" + "\n".join(bad)


def test_llm_side_check_catches_a_crossing():
    """The rule above, on made-up imports: it can fail."""
    crossing = [
        Import("et_tensorrt.llm.runner.transcribe", "et_tensorrt.llm.export.speech", 1, False, False),
        Import("et_tensorrt.llm.export.causal", "et_tensorrt.llm.runner.token_loop", 1, True, False),
        Import("et_tensorrt.llm.sampling", "et_tensorrt.llm.export.causal", 1, False, True),
    ]
    allowed = [
        Import("et_tensorrt.llm.runner.transcribe", "et_tensorrt.llm.constants", 1, False, False),
        Import("et_tensorrt.llm.export.causal", "et_tensorrt.llm.export.recurrent", 1, True, False),
        Import("et_tensorrt.llm", "et_tensorrt.llm.runner.opening", 1, False, True),
        Import("et_tensorrt.cli.generate", "et_tensorrt.llm.runner.opening", 1, True, False),
    ]
    assert across_llm_sides(crossing + allowed) == crossing


def test_runtime_and_format_never_import_the_backend():
    bad = [
        i
        for i in imports()
        if i.source.startswith(("et_tensorrt.runtime", "et_tensorrt.format"))
        and i.target.startswith("et_tensorrt.backend")
    ]
    assert bad == []


def test_format_imports_no_tensorrt_or_onnx():
    heavy = ("tensorrt", "tensorrt_rtx", "onnx", "onnxruntime", "onnxscript", "onnx_ir", "executorch")
    bad = []
    for name, path in modules().items():
        if layer(name) != "format" or path.suffix != ".py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                bad += [f"{name}: {a.name}" for a in node.names if a.name.split(".")[0] in heavy]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module.split(".")[0] in heavy:
                bad.append(f"{name}: {node.module}")
    assert bad == []


def report(found: list[Import]) -> None:
    largest = max(circles(found), key=len, default=[])
    print(f"largest circle: {len(largest)} files {largest}")
    print(f"import circles: {len(circles(found))}")
    runtime_backend = [
        i for i in found if i.source.startswith("et_tensorrt.runtime") and i.target.startswith("et_tensorrt.backend")
    ]
    print(f"runtime -> backend imports: {len(runtime_backend)}")
    print(f"function-local imports of the package's modules: {sum(i.local for i in found)}")
    print(f"imports between llm/export and llm/runner: {len(across_llm_sides(found))}")
    bad = against_layers(found)
    print(f"imports against the layers: {len(bad)}")
    for i in bad:
        print(f"  {i.source}:{i.line} ({layer(i.source)}) -> {i.target} ({layer(i.target)})")


if __name__ == "__main__":
    report(imports(Path(sys.argv[1]) if len(sys.argv) > 1 else PACKAGE))
    print(f"import circles among scripts/: {circles(script_imports())}")


def _imports_at_load(tree: ast.Module):
    """The import statements that run when the module is imported: not inside a function, not under TYPE_CHECKING."""
    pending = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If) and _type_checking(node):
            pending += node.orelse
        elif not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            pending += list(ast.iter_child_nodes(node))


def test_format_reads_blobs_without_torch():
    """Reading a blob or a .pte's tables loads no torch (``et-tensorrt inspect`` answers in milliseconds): the format
    layer imports torch, numpy and the runtime's native module (which links torch) only where it makes tensors."""
    heavy = {"torch", "numpy", "ml_dtypes"}
    bad = []
    for name, path in modules().items():
        if layer(name) != "format" or path.suffix != ".py":
            continue
        for node in _imports_at_load(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                bad += [f"{name}: {a.name}" for a in node.names if a.name.split(".")[0] in heavy]
            elif not node.level and node.module.split(".")[0] in heavy:
                bad.append(f"{name}: {node.module}")
            elif not node.level and node.module == "et_tensorrt" and any(a.name == "_C" for a in node.names):
                bad.append(f"{name}: et_tensorrt._C")
    assert bad == []
