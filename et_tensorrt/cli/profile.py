"""``run --profile ETDUMP``: the delegates' events per phase, and the ETDump for Inspector (docs/profiling.md)."""

from __future__ import annotations


def print_profile(runner, etdump_path: str, *, calls: int, warmup: int, layers: bool) -> None:
    """Prints the profile table of the method's load and every call the Runner made, then writes the ETDump."""
    table = runner.profile_table()
    executors = sorted({p.executor for p in runner.last_plans})
    ran = f"{calls} call{'s' * (calls != 1)}" + (f", {warmup} of them warm-up" if warmup else "")
    print(f"profile of the load and {ran} (the delegates' ETDump events; executor {', '.join(executors) or '-'}):")
    print(table)
    if layers and "tensorrt" not in executors:
        print("no per-layer rows: no delegate ran TensorRT here (only a TensorRT engine's layers are timed)")
    size = runner.write_etdump(etdump_path)
    print(f"wrote {etdump_path} ({size:,} bytes): executorch.devtools.Inspector(etdump_path={etdump_path!r})")
