"""Two processes sharing one build cache: readers never see a partial entry, and two lowerings of the same
model at once both succeed with one entry left."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Writes entries of two sizes under one key while reading it back; prints what it saw.
_HAMMER = r"""
import os, sys
from et_tensorrt.format import blob as B
from et_tensorrt.builder import build_cache
key = "c" * 64
io = [B.IOEntry(B.ROLE_INPUT, "x", 6, (B.DimRange.static(2),))]
payloads = [bytes([int(sys.argv[1])]) * 3_000_000, bytes([int(sys.argv[1]) + 1]) * 1_000_000]
seen = bad = 0
for i in range(int(sys.argv[2])):
    build_cache.store(build_cache.Entry(key=key, engine=payloads[i % 2], io=io))
    for _ in range(3):
        entry = build_cache.load(key)
        if entry is not None:
            seen += 1
            engine = entry.engine.to_bytes()
            bad += not (len(set(engine)) == 1 and len(engine) in (3_000_000, 1_000_000))
print(seen, bad, build_cache.stats["corrupt"])
"""

_LOWER = r"""
import sys, torch
from et_tensorrt import lower, inspection
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).eval()
data = lower(model, (torch.randn(2, 16),), min_block_size=1)
(d,) = [d for d in inspection.inspect_bytes(data).method("forward").delegates if d.ours]
sys.stdout.write(d.blob.metadata["cache"] + " " + str(hash(bytes(d.blob.engine))) + "\n")
"""


def _spawn(code: str, *args: str, cache: Path) -> subprocess.Popen:
    env = dict(os.environ, ET_TENSORRT_CACHE_DIR=str(cache), PYTHONHASHSEED="0")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    return subprocess.Popen(
        [sys.executable, "-c", code, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def _finish(procs: list[subprocess.Popen]) -> list[str]:
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=900)
        assert p.returncode == 0, err[-3000:]
        outs.append(out.strip())
    return outs


def test_readers_never_see_a_partial_entry(tmp_path):
    outs = _finish([_spawn(_HAMMER, str(b), "40", cache=tmp_path) for b in (10, 20)])
    for out in outs:
        seen, bad, corrupt = map(int, out.split())
        assert seen > 0 and bad == 0 and corrupt == 0, out
    assert [p.name for p in tmp_path.iterdir()] == ["c" * 64 + ".etrc"]  # no temp file left behind


def test_two_lowerings_of_one_model_at_once(tmp_path):
    outs = _finish([_spawn(_LOWER, cache=tmp_path) for _ in range(2)])
    outcomes = sorted(o.split()[0] for o in outs)
    assert outcomes in (["miss", "miss"], ["hit", "miss"]), outs
    assert len({o.split()[1] for o in outs}) == 1, "both blobs carry the same engine"
    assert len(list(tmp_path.glob("*.etrc"))) == 1 and not list(tmp_path.glob(".tmp-*"))
