"""A method's inputs as its caller knows them, for errors (``input 1 ('cache_position')``).

ExecuTorch keeps the exported program's input pytree spec in the program (``ExecutionPlan.container_meta_type
.encoded_inp_str``): ``(args, kwargs)``, the keyword arguments by name. The runner (extension/runner) reads that
string from the file and asks here only when an error needs the names."""

from __future__ import annotations


def input_names(encoded: str) -> list[str]:
    """One name per method input, in order: a keyword argument's name (``"cache_position"``), a key inside an
    argument (``"input_pos"`` of ``(tokens, {"input_pos": ...})``), or "" for a plain positional argument; [] for a
    spec this cannot read."""
    from torch.utils import _pytree as pytree

    try:
        spec = pytree.treespec_loads(encoded)
        tree = pytree.tree_unflatten(list(range(spec.num_leaves)), spec)
        paths = [path for path, _ in pytree.tree_flatten_with_path(tree)[0]]
    except Exception:  # noqa: BLE001 - a spec of another shape: the errors say "input 1" without a name
        return []
    names = []
    for path in paths:
        keys = [k for k in path[1:] if isinstance(k, (pytree.MappingKey, pytree.GetAttrKey))]
        if not keys:
            names.append("")
            continue
        first = path.index(keys[0])
        names.append(str(getattr(keys[0], "key", getattr(keys[0], "name", ""))) + pytree.keystr(path[first + 1 :]))
    return names
