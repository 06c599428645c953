#!/usr/bin/env bash
# Runs every fuzzer and prints, per fuzzer and seed, the inputs run, crashes, hangs and code runs:
#   blob      the C++ blob reader (scripts/fuzz_blob.py, atheris)
#   describe  describe() over random strided views (scripts/fuzz_describe.py, atheris)
#   pte       whole mutated .pte files through Runner, in child processes (scripts/fuzz_pte.py)
#   ptd       mutated .ptd files (named data) beside their .pte through Runner (scripts/fuzz_pte.py --ptd)
#   ptd-head  .ptd headers and key tables mutated, through ExecuTorch's own executorch.runtime
#             (scripts/fuzz_pte.py --ptd --head --through executorch)
#   program   hostile embedded programs through the safe loader, in child processes (scripts/fuzz_program.py)
# Crashing inputs are saved in $ARTIFACTS (crash-*; reproduce a blob one with `python scripts/fuzz_blob.py
# <file>`, a .pte with `python -c "import et_tensorrt; et_tensorrt.Runner('<file>')"`). Exit status 0 when
# nothing was found. Figures (one JSON line per pte/program seed) are appended to $ARTIFACTS/figures.jsonl.
#
#   scripts/fuzz.sh                   # 60,000 blob + 60,000 views + 3 x 2,000 .pte + 3 x 2,000 .ptd + 2,000 .ptd heads + 2 x 10,000 programs
#   BLOB_RUNS=1000000 PTE_SEEDS="0 1 2 3" PTE_INPUTS=5000 scripts/fuzz.sh
#
# Against the sanitized build: run scripts/sanitize.sh once, then
#   FUZZ_PYTHONPATH=<its package dir> FUZZ_PRELOAD="$(gcc -print-file-name=libasan.so)" scripts/fuzz.sh
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BLOB_RUNS="${BLOB_RUNS:-60000}"
DESCRIBE_RUNS="${DESCRIBE_RUNS:-60000}"
PTE_SEEDS="${PTE_SEEDS:-0 1 2}"
PTE_INPUTS="${PTE_INPUTS:-2000}"
PTD_SEEDS="${PTD_SEEDS:-0 1 2}"
PTD_INPUTS="${PTD_INPUTS:-2000}"
PTD_HEAD_SEEDS="${PTD_HEAD_SEEDS:-0}"
PTD_HEAD_INPUTS="${PTD_HEAD_INPUTS:-2000}"
PROGRAM_SEEDS="${PROGRAM_SEEDS:-0 1}"
PROGRAM_INPUTS="${PROGRAM_INPUTS:-10000}"
ARTIFACTS="${ARTIFACTS:-$(mktemp -d /tmp/et_tensorrt_fuzz.XXXXXX)}"
PY="${PYTHON:-python}"
[[ -n "${FUZZ_PYTHONPATH:-}" ]] && export PYTHONPATH="$FUZZ_PYTHONPATH${PYTHONPATH:+:$PYTHONPATH}"
[[ -n "${FUZZ_PRELOAD:-}" ]] && export LD_PRELOAD="$FUZZ_PRELOAD" ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:allocator_may_return_null=1"
export ET_TENSORRT_CACHE_DIR="${ET_TENSORRT_CACHE_DIR:-$ARTIFACTS/engines}"  # never the user's cache
mkdir -p "$ARTIFACTS/blob_corpus"
cd "$ARTIFACTS"   # libFuzzer may drop files in the working directory

run_atheris() {  # name script runs extra-args...
  local name="$1" script="$2" runs="$3"; shift 3
  local log="$ARTIFACTS/$name.log" stats="$ARTIFACTS/$name.stats"
  rm -f "$stats"
  FUZZ_STATS_FILE="$stats" "$PY" "$ROOT/scripts/$script" -runs="$runs" -artifact_prefix="$ARTIFACTS/$name-" \
      -print_final_stats=1 "$@" >"$log" 2>&1
  local rc=$?
  local done_line n
  done_line=$(grep -E '^Done [0-9]+ runs' "$log" | tail -1)
  n=$(sed -E 's/^Done ([0-9]+) runs.*/\1/' <<<"$done_line")
  echo "== $name: ${done_line:-no 'Done' line} (exit $rc)"
  [[ -s "$stats" ]] && sed 's/^/   /' "$stats"
  if [[ $rc -ne 0 ]]; then
    echo "   CRASH / contract violation in $name:"
    grep -vE '^#[0-9]+|^INFO|^WARNING' "$log" | tail -25 | sed 's/^/   | /'
    ls "$ARTIFACTS"/"$name"-* 2>/dev/null | sed 's/^/   input: /'
    FAILED=1
  fi
  TOTAL=$((TOTAL + ${n:-0}))
}

run_children() {  # name script seed inputs extra-args...
  local name="$1" script="$2" seed="$3" inputs="$4"; shift 4
  local log="$ARTIFACTS/$name-$seed.log"
  "$PY" "$ROOT/scripts/$script" --seed "$seed" --inputs "$inputs" --artifacts "$ARTIFACTS" \
      --figures "$ARTIFACTS/figures.jsonl" "$@" >"$log" 2>&1
  local rc=$?
  echo "== $name seed $seed (exit $rc): $(grep -E '^\{' "$log" | tail -1)"
  grep -E '^(CRASH|HANG|CODE RAN|SILENT RUNS|[0-9]+x VIOLATION)' "$log" | sed 's/^/   /'
  [[ $rc -ne 0 ]] && FAILED=1
  TOTAL=$((TOTAL + inputs))
}

TOTAL=0
FAILED=0
run_atheris blob fuzz_blob.py "$BLOB_RUNS" -max_len=4096 "$ARTIFACTS/blob_corpus"
run_atheris describe fuzz_describe.py "$DESCRIBE_RUNS" -len_control=0 -max_len=256
for seed in $PTE_SEEDS; do run_children pte fuzz_pte.py "$seed" "$PTE_INPUTS"; done
for seed in $PTD_SEEDS; do run_children ptd fuzz_pte.py "$seed" "$PTD_INPUTS" --ptd; done
for seed in $PTD_HEAD_SEEDS; do
  run_children ptd-head fuzz_pte.py "$seed" "$PTD_HEAD_INPUTS" --ptd --head --through executorch
done
for seed in $PROGRAM_SEEDS; do run_children program fuzz_program.py "$seed" "$PROGRAM_INPUTS"; done
echo "== total inputs: $TOTAL; crashes/hangs/code runs/silent runs/violations: $([[ $FAILED -eq 0 ]] && echo none || echo SEE ABOVE); logs in $ARTIFACTS"
exit $FAILED
