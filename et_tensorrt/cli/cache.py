"""``cache``: what the on-disk build cache holds (``list``), its size against the limit (``size``), and
``clear``. Entries are made by lowering (et_tensorrt.builder.build_cache); nothing here builds."""

from __future__ import annotations

import time

from .._text import table
from ..builder import build_cache
from .common import EXIT_OK


def size_text(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _ago(seconds: float) -> str:
    seconds = max(0.0, seconds)
    for unit, scale in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= scale:
            return f"{seconds / scale:.0f} {unit} ago"
    return f"{seconds:.0f} s ago"


def _summary(count: int) -> str:
    limit = build_cache.max_bytes()
    used = build_cache.total_bytes()
    share = f" ({100 * used / limit:.0f} %)" if limit else ""
    return (
        f"{build_cache.cache_dir()}: {count} entr{'y' if count == 1 else 'ies'}, {size_text(used)} of the "
        f"{size_text(limit)} limit{share} ({build_cache.ENV_CACHE_DIR}, {build_cache.ENV_CACHE_MAX_BYTES})"
    )


def _what(info: dict) -> str:
    parts = [str(info[k]) for k in ("source", "label") if info.get(k)]
    if info.get("nodes") is not None:
        parts.append(f"{info['nodes']} nodes ({info.get('ops', '')})")
    if info.get("inputs"):
        parts.append("inputs " + ", ".join(info["inputs"]))
    return "; ".join(parts) or "not recorded"


def cmd_cache(args) -> int:
    if args.action == "clear":
        count, freed = build_cache.clear()
        print(f"removed {count} file(s), {size_text(freed)}, from {build_cache.cache_dir()}")
        return EXIT_OK
    entries = build_cache.entries()
    if args.action == "list":
        if entries:
            now = time.time()
            rows = [("key", "size", "last used", "precision", "what (model; partition; nodes; inputs)")]
            for e in entries:
                rows.append(
                    (
                        e.key[:16],
                        size_text(e.size),
                        _ago(now - e.last_used),
                        e.info.get("precision", "?"),
                        _what(e.info),
                    )
                )
            print("\n".join(table(rows, width=140)))
        else:
            print("the build cache is empty")
    print(_summary(len(entries)))
    return EXIT_OK
