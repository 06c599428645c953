"""Fuzz the embedded-program loader on its own: hostile GRAPH JSON, WEIGHTS tables and version-1 archives.

    python scripts/fuzz_program.py --seed 0 --inputs 20000 [--artifacts DIR]

Each input is a delegate blob derived from a lowered seed (the blobs of scripts/fuzz_seeds.py's seed
programs, as format 2 and as format 1) by one structured mutation:

* ``json_value``  1-4 values anywhere in the torch.export JSON replaced by bait: expressions that
                  ``eval`` would run, Python source in names, other torch callables as targets, huge
                  and negative integers, wrong types, deep nesting, long strings;
* ``json_expr``   a tensor size turned into an expression: random tokens of the grammar mixed with bait;
* ``json_target`` a node target replaced (torch callables, as_strided-like and in-place ops, HOPs,
                  extension ops, another allowed op);
* ``json_field``  a field torch interprets added or changed (guards_code, custom objects, treespec enums,
                  sub-graph / operator arguments, tokens, verifiers, schema version);
* ``json_bytes``  1-16 bytes of the JSON text flipped;
* ``weights``     the WEIGHTS table made inconsistent with the graph (renamed, re-kinded, re-typed,
                  reshaped, dropped or extra entries) or its bytes flipped;
* ``archive``     a version-1 archive with a pickled payload on each route, truncated or oversized
                  entries, compressed entries, unknown or traversing names, or its model JSON mutated
                  as above.

Every input goes through the runtime's own path: ``_reader.parse_blob`` then ``executors.create_executor`` (the
delegate's choice)
(no GPU: the PyTorch executor, i.e. the safe loader) and, when it loads, one run on inputs shaped by the
I/O table. Contract: parse and load either succeed or raise BlobFormatError / ProgramRefusedError (any
other exception is a *violation*, counted and failing the run); no crash, no hang, no code from the file
(scripts/fuzz_children.py: child processes, audit hook, canary directory). The last line printed is the
figures for the seed.
"""

from __future__ import annotations

import copy
import io
import json
import random
import struct
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FAMILIES = ("json_value", "json_expr", "json_target", "json_field", "json_bytes", "weights", "archive")


def baits(canary: str) -> list:
    """Values an attacker would put in a field torch evaluates, imports, or pastes into code."""
    path = f"{canary}/bait"
    return [
        f"open({path!r}, 'w')",
        f"__import__('os').system('touch {path}')",
        f"s0.__class__.__init__.__globals__['os'].system('touch {path}')",
        f"x = open({path!r}, 'w')\n    y",
        f'a") or open({path!r}, "w") or ("',
        "torch.save",
        "torch.load",
        "builtins.exec",
        "os.system",
        f"this:{path}",
        "s0 + 1",
        "FloorDiv(s0, 2)",
        "s0**99999999",
        "PowByNatural(99999999999999999999, 99999999999999999999)",
        2**63,
        2**64,
        -1,
        -(2**63) - 1,
        10**40,
        0,
        1,
        3.5,
        float("inf"),
        float("nan"),
        None,
        True,
        False,
        "",
        "x" * 5000,
        [],
        {},
        [[[[[[[[[[[[]]]]]]]]]]]],
        {"as_int": 1},
        {"as_expr": {"expr_str": f"open({path!r}, 'w')", "hint": None}},
        {"__enum__": True, "fqn": "this:x", "name": "y"},
    ]


TARGETS = [
    "torch.save",
    "torch.load",
    "torch.hub.load",
    "builtins.exec",
    "math.factorial",
    "_operator.call",
    "torch._C._pickle_load_obj",
    "torch.ops.aten.as_strided.default",
    "torch.ops.aten.set_.source_Tensor",
    "torch.ops.aten.resize_.default",
    "torch.ops.aten._reshape_alias.default",
    "torch.ops.aten.add_.Tensor",
    "torch.ops.higher_order.cond",
    "torch.ops.aten.from_file.default",
    "#custom:op",
    "torch.ops.aten.mm.default",
    "torch.ops.aten.relu.default",
    "torch.ops.aten.index_select.default",
    "torch.ops.aten.full.default",
    "torch.ops.aten.nonexistent.default",
    "torch.ops.aten.embedding.default",
]
EXPR_TOKENS = [
    "s0",
    "s1",
    "u0",
    "1",
    "2",
    "99999999999999999999",
    "+",
    "-",
    "*",
    "//",
    "%",
    "**",
    "(",
    ")",
    ",",
    "FloorDiv(",
    "Mod(",
    "Max(",
    "Min(",
    "CeilToInt(",
    "Eq(",
    "True",
    "<",
    ">=",
    "2.5",
    "open(",
    "__import__(",
    "'os'",
    ".",
    "lambda",
    ":",
    "[",
    "]",
    "x",
    "_",
    "\n",
]


# ---------------------------------------------------------------------------------------------- seeds


def seed_blobs(artifacts: Path, models: str) -> list[tuple[str, bytes]]:
    """(name, blob) for every seed program's delegate, as format 2 and as format 1."""
    sys.path.insert(0, str(ROOT / "scripts"))
    sys.path.insert(0, str(ROOT / "tests"))
    import crafted
    from fuzz_seeds import build_seeds

    from et_tensorrt.inspection import delegate_blobs

    cache = artifacts / f"program_seeds-{models.replace(',', '-')}.json"
    if cache.exists():
        return [(n, bytes.fromhex(h)) for n, h in json.loads(cache.read_text())]
    out = []
    for name, pte in build_seeds(artifacts / "seeds", models).items():
        for i, blob in enumerate(delegate_blobs(pte)):
            out.append((f"{name}{i}-v2", blob))
            out.append((f"{name}{i}-v1", crafted.v1_blob(blob, crafted.partition_archive(blob))))
    cache.write_text(json.dumps([(n, b.hex()) for n, b in out]))
    return out


# ------------------------------------------------------------------------------------------ mutations


def _paths(doc, limit: int = 4000) -> list[tuple]:
    """Paths (key/index tuples) to the values of a JSON document, breadth-first, at most ``limit``."""
    out, queue = [], [((), doc)]
    while queue and len(out) < limit:
        path, node = queue.pop(0)
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for k, v in items:
            out.append(path + (k,))
            queue.append((path + (k,), v))
    return out


def _set(doc, path, value) -> None:
    node = doc
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value


def mutate_json(doc: dict, rng: random.Random, canary: str, family: str) -> dict:
    doc = copy.deepcopy(doc)
    graph = doc["graph_module"]["graph"]
    bait = baits(canary)
    if family == "json_value":
        for _ in range(rng.randint(1, 4)):
            paths = _paths(doc)  # again: a replacement may have removed some
            _set(doc, paths[rng.randrange(len(paths))], copy.deepcopy(rng.choice(bait)))
    elif family == "json_expr":
        tokens = [rng.choice(EXPR_TOKENS) for _ in range(rng.randint(1, 12))]
        expr = " ".join(tokens) if rng.random() < 0.5 else "".join(tokens)
        metas = list(graph["tensor_values"].values())
        meta = rng.choice(metas)
        if meta["sizes"]:
            meta["sizes"][rng.randrange(len(meta["sizes"]))] = {"as_expr": {"expr_str": expr, "hint": {"as_int": 2}}}
        else:
            graph["sym_int_values"]["fuzz_sym"] = {"as_expr": {"expr_str": expr, "hint": None}}
    elif family == "json_target":
        node = rng.choice(graph["nodes"])
        node["target"] = rng.choice(TARGETS)
    elif family == "json_field":
        choice = rng.randrange(9)
        node = rng.choice(graph["nodes"])
        if choice == 0:
            doc["guards_code"] = [rng.choice(bait[:3])]
        elif choice == 1:
            graph["custom_obj_values"]["obj"] = {"name": "obj", "class_fqn": "__torch__.torch.classes.x.Y"}
        elif choice == 2:
            ctx = json.dumps([{"__enum__": True, "fqn": "this:x", "name": "y"}])
            doc["graph_module"]["module_call_graph"][0]["signature"]["out_spec"] = json.dumps(
                [1, {"type": "builtins.dict", "context": ctx, "children_spec": []}]
            )
        elif choice == 3:
            node["inputs"].append({"name": "fn", "arg": {"as_operator": "torch.save"}, "kind": 2})
        elif choice == 4:
            node["inputs"].append(
                {"name": "g", "arg": {"as_graph": {"name": "g", "graph": copy.deepcopy(graph)}}, "kind": 1}
            )
        elif choice == 5:
            doc["graph_module"]["signature"]["input_specs"].append({"token": {"arg": {"name": "tok"}}})
        elif choice == 6:
            doc["verifiers"] = ["EDGE"]
        elif choice == 7:
            doc["schema_version"] = {"major": rng.choice([0, 1, 99]), "minor": 0}
        else:
            doc["graph_module"]["treespec_namedtuple_fields"] = {"x": {"field_names": ["a"]}}
    return doc


def rewrite_sections(blob: bytes, edit) -> bytes:
    import crafted

    version, dev_type, dev_index, sections = crafted.blob_sections(blob)
    return crafted.pack_blob(edit(sections), version, dev_type, dev_index)


def mutate_weights(blob: bytes, rng: random.Random) -> bytes:
    import torch

    from et_tensorrt.embedded_program.loader import weight_tensor
    from et_tensorrt.format import blob as B

    parsed = B.read_blob(blob)
    if rng.random() < 0.3:  # raw bytes of the WEIGHTS section

        def flip(sections):
            out = []
            for kind, payload in sections:
                if kind == B.SECTION_WEIGHTS and payload:
                    payload = bytearray(payload)
                    for _ in range(rng.randint(1, 16)):
                        payload[rng.randrange(min(len(payload), 512))] ^= rng.randint(1, 255)
                    payload = bytes(payload)
                out.append((kind, payload))
            return out

        return rewrite_sections(blob, flip)
    weights = [B.Weight(w.name, w.kind, weight_tensor(parsed, w), w.persistent) for w in parsed.weights]
    i = rng.randrange(len(weights)) if weights else 0
    op = rng.randrange(6)
    if weights and op == 0:
        weights[i] = B.Weight(weights[i].name + rng.choice(["x", ".y", "_0"]), weights[i].kind, weights[i].tensor)
    elif weights and op == 1:
        weights[i] = B.Weight(weights[i].name, rng.choice(B.WEIGHT_KINDS), weights[i].tensor)
    elif weights and op == 2:
        weights[i] = B.Weight(
            weights[i].name,
            weights[i].kind,
            weights[i].tensor.to(rng.choice([torch.float16, torch.int64, torch.bool, torch.uint8])),
        )
    elif weights and op == 3:
        t = weights[i].tensor.reshape(-1)
        weights[i] = B.Weight(weights[i].name, weights[i].kind, t[: max(0, t.numel() - rng.randint(0, 3))])
    elif weights and op == 4:
        del weights[i]
    else:
        weights.append(B.Weight(rng.choice(["extra", "0.weight", "a.b"]), "parameter", torch.zeros(2)))
    return B.write_blob(
        parsed.io, engine=parsed.engine, graph=parsed.graph, weights=weights, exec_device_type=parsed.exec_device_type
    )


def mutate_archive(blob: bytes, rng: random.Random, canary: str) -> bytes:
    import crafted

    archive = dict(crafted.blob_sections(blob)[3])[3]
    choice = rng.randrange(8)
    if choice == 0:
        route = rng.choice(crafted.V1_ROUTES)
        archive = crafted.rewrite_archive(archive, crafted.v1_route(route, f"{canary}/{route}"))
    elif choice == 1:  # model JSON mutated like a v2 GRAPH
        family = rng.choice(FAMILIES[:5])

        def edit(entries):
            if family == "json_bytes":
                text = bytearray(entries["models/model.json"])
                for _ in range(rng.randint(1, 16)):
                    text[rng.randrange(len(text))] ^= rng.randint(1, 255)
                entries["models/model.json"] = bytes(text)
            else:
                doc = json.loads(entries["models/model.json"])
                entries["models/model.json"] = json.dumps(mutate_json(doc, rng, canary, family)).encode()

        archive = crafted.rewrite_archive(archive, edit)
    elif choice == 2:  # truncated
        archive = archive[: rng.randrange(len(archive))]
    elif choice == 3:  # a declared size in the central directory made huge / small
        data = bytearray(archive)
        at = data.rfind(b"PK\x01\x02", 0, rng.randrange(len(data) + 1) or len(data))
        if at >= 0:
            struct.pack_into("<I", data, at + 24, rng.choice([0, 1, 2**31, 2**32 - 1]))
        archive = bytes(data)
    elif choice == 4:  # compressed entries (a deflate bomb would be refused the same way)
        zf = zipfile.ZipFile(io.BytesIO(archive))
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zo:
            for name in zf.namelist():
                zo.writestr(name, zf.read(name) + (b"\0" * 100000 if name.endswith("json") else b""))
        archive = out.getvalue()
    elif choice == 5:  # extra / traversing / duplicate names
        name = rng.choice(
            [
                "extra/file",
                "../../etc/passwd",
                "data/weights/weight_0",
                "models/other.json",
                "data/weights/model.pt",
                "data/constants/opaque_obj_3",
            ]
        )
        archive = crafted.rewrite_archive(archive, lambda e: e.__setitem__(name, b"\x80\x04K\x01."))
    elif choice == 6:  # config values of the wrong type

        def edit(entries):
            doc = json.loads(entries["data/weights/model_weights_config.json"])
            entry = next(iter(doc["config"].values()), None)
            if entry is not None:
                entry[rng.choice(["use_pickle", "path_name", "tensor_meta", "is_param"])] = rng.choice(baits(canary))
            entries["data/weights/model_weights_config.json"] = json.dumps(doc).encode()

        archive = crafted.rewrite_archive(archive, edit)
    else:  # bytes flipped anywhere in the archive
        data = bytearray(archive)
        for _ in range(rng.randint(1, 32)):
            data[rng.randrange(len(data))] ^= rng.randint(1, 255)
        archive = bytes(data)
    return rewrite_sections(blob, lambda sections: [(k, archive if k == 3 else p) for k, p in sections])


def mutate(seeds: list[tuple[str, bytes]], seed: int, index: int, canary: str) -> tuple[str, str, bytes]:
    rng = random.Random(seed * 1_000_003 + index)
    name, blob = seeds[index % len(seeds)]
    v1 = name.endswith("-v1")
    family = "archive" if v1 else FAMILIES[rng.randrange(len(FAMILIES) - 1)]
    if family == "weights":
        return name, family, mutate_weights(blob, rng)
    if family == "archive":
        return name, family, mutate_archive(blob, rng, canary)

    def edit(sections):
        out = []
        for kind, payload in sections:
            if kind == 5:
                if family == "json_bytes":
                    text = bytearray(payload)
                    for _ in range(rng.randint(1, 16)):
                        text[rng.randrange(len(text))] ^= rng.randint(1, 255)
                    payload = bytes(text)
                else:
                    payload = json.dumps(mutate_json(json.loads(payload), rng, canary, family)).encode()
            out.append((kind, payload))
        return out

    return name, family, rewrite_sections(blob, edit)


# ----------------------------------------------------------------------------------------- one input


def inputs_for(parsed: dict) -> list:
    import torch

    from et_tensorrt.errors import UnsupportedDtypeError
    from et_tensorrt.format.dtypes import scalar_type_dtype

    out = []
    for e in parsed["inputs"]:
        shape = [max(1, min(opt, 64)) for _lo, opt, _hi in e["dims"]]
        try:
            dtype = scalar_type_dtype(e["dtype"])
        except UnsupportedDtypeError:  # a code torch lacks (the reader accepts any): float32 stands in
            dtype = torch.float32
        out.append(torch.randn(shape).to(dtype) if dtype.is_floating_point else torch.zeros(shape, dtype=dtype))
    return out


def load_and_run(blob: bytes) -> str:
    from et_tensorrt.errors import BlobFormatError, ProgramRefusedError
    from et_tensorrt.format import _reader
    from et_tensorrt.runtime import executors

    try:
        parsed = _reader.parse_blob(blob)
    except BlobFormatError:
        return "blob refused"
    try:
        executor, _ = executors.create_executor(blob)
    except ProgramRefusedError:
        return "program refused"
    except BlobFormatError:
        return "blob refused (loader)"
    except Exception as e:  # noqa: BLE001 - the contract: only the two typed refusals
        return f"VIOLATION {type(e).__name__}: {str(e)[:160]}"
    try:
        executor.run(inputs_for(parsed), [None] * len(parsed["outputs"]))
    except Exception as e:  # noqa: BLE001 - a loaded program's own error (shapes, dtypes) is its business
        return f"loaded, run raised {type(e).__name__}"
    return "loaded, ran"


# ----------------------------------------------------------------------------------------- processes


def child(args) -> None:
    import logging

    import torch
    from fuzz_children import child_loop

    logging.disable(logging.CRITICAL)
    torch.set_num_threads(1)
    seeds = seed_blobs(Path(args.artifacts), args.models)

    def one(index: int) -> list[str]:
        name, family, blob = mutate(seeds, args.seed, index, args.canary)
        return [load_and_run(blob), f"mutation {family}"]

    child_loop(args.start, args.stop, args.progress, args.result, args.canary, one)


def parent(args) -> int:
    from fuzz_children import run_batches

    artifacts = Path(args.artifacts)
    seeds = seed_blobs(artifacts, args.models)

    def save_input(index: int, where: Path) -> str:
        name, family, blob = mutate(seeds, args.seed, index, str(where / "canary"))
        path = where / f"crash-program-{args.seed}-{index}.etrt"
        path.write_bytes(blob)
        return f"{name}, {family}: {path}"

    rc, figures = run_batches(
        script=__file__,
        seed=args.seed,
        inputs=args.inputs,
        batch=args.batch,
        batch_timeout=args.batch_timeout,
        artifacts=artifacts,
        child_args=["--models", args.models],
        save_input=save_input,
        figures_file=args.figures,
        name="program",
    )
    violations = {k: v for k, v in figures["outcomes"].items() if k.startswith("VIOLATION")}
    for k, v in violations.items():
        print(f"{v}x {k}")
    return rc or (1 if violations else 0)


def main() -> int:
    sys.path.insert(0, str(ROOT / "scripts"))
    sys.path.insert(0, str(ROOT / "tests"))
    from fuzz_children import fuzz_main, fuzz_parser

    p = fuzz_parser(
        __doc__,
        inputs=20000,
        batch=1000,
        batch_timeout=300,
        models="mlp,conv,dynamic",
        artifacts="/tmp/et_tensorrt_fuzz_program",
    )
    return fuzz_main(p, child, parent)


if __name__ == "__main__":
    sys.exit(main())
