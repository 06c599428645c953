"""A method's inputs by name, as the program it was lowered from names them: a keyword input by its keyword, a
positional one by its placeholder (``x``). ``check --inputs`` takes a dict by these names against the exported
program; the partitioner records them in each partition's compile specs (``METHOD_INPUT_NAMES``, kept in the
``.pte``), so ``run --inputs`` takes the same dict against the lowered one, whose pytree spec names keywords only."""

from __future__ import annotations

import json


def keyword_names(spec_json: str) -> list[str | None]:
    """Per flat input, its keyword when it is one of the spec's keyword inputs (``(args, kwargs)``, torch's treespec
    JSON, as a .pt2 and a .pte record it), else None. ``[]`` when the spec cannot be read."""

    def leaves(node) -> int:
        children = node.get("children_spec") or []
        return 1 if node.get("type") is None else sum(leaves(c) for c in children)

    try:
        root = json.loads(spec_json)[1]
        args, kwargs = root["children_spec"]
        names: list[str | None] = [None] * leaves(args)
        keys = json.loads(kwargs["context"]) if kwargs.get("type") == "builtins.dict" else []
        for key, child in zip(keys, kwargs["children_spec"], strict=True):
            names += [key] if child.get("type") is None else [None] * leaves(child)
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        return []
    return names


def user_input_names(program) -> list[str]:
    """Each user input of an ExportedProgram, in its flat order: its keyword where it is a keyword input, else its
    placeholder's name."""
    from torch.export.graph_signature import InputKind
    from torch.utils._pytree import treespec_dumps

    user = [s.arg for s in program.graph_signature.input_specs if s.kind == InputKind.USER_INPUT]
    keywords = keyword_names(treespec_dumps(program.call_spec.in_spec)) if program.call_spec.in_spec else []
    return [(keywords[i] if len(keywords) == len(user) else None) or arg.name for i, arg in enumerate(user)]


def encode_names(names: list[str]) -> str:
    return json.dumps(list(names))


def decode_names(text: str | bytes) -> list[str]:
    """``METHOD_INPUT_NAMES``'s value; [] for one this cannot read (a foreign writer's)."""
    try:
        names = json.loads(text)
    except (ValueError, TypeError):
        return []
    return names if isinstance(names, list) and all(isinstance(n, str) for n in names) else []
