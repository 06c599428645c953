#!/usr/bin/env bash
# The GPU check: what et_tensorrt claims about CUDA devices, checked on the lent GPU machine (docs/gpu-check.md).
#
#   scripts/gpu_check.sh --bundle [DIR]     here: lower the check's programs, fetch the cp312 wheels, split it
#                                           all into device calls of <= 60 MiB in DIR (default .gpucheck);
#                                           prints "call N: X MiB" per call
#   scripts/gpu_check.sh --call N [DIR]     on the device machine, call N of the bundle in DIR (each call
#                                           carries DIR/callN); results under $OUT
#   scripts/gpu_check.sh --local [SCRATCH]  here or in CI, no GPU: bundle into a scratch folder, run every
#                                           call against a scratch stash (unpack, build, import, run the
#                                           programs through the CPU fallback; GPU rows: "skipped: no GPU"),
#                                           then the cold-machine path; deletes SCRATCH unless given
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PY=${PYTHON:-python3}
HERE=scripts/gpu_check

usage() { sed -n '2,12p' "$0" >&2; exit 2; }

case "${1:-}" in
  --bundle)
    DIR=${2:-.gpucheck}
    PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" exec "$PY" "$HERE/bundle.py" "$DIR"
    ;;
  --call)
    [ -n "${2:-}" ] || usage
    exec "$PY" "$HERE/device.py" --call "$2" "${3:-.gpucheck}"
    ;;
  --local)
    if [ -n "${2:-}" ]; then SCRATCH=$(mkdir -p "$2" && cd "$2" && pwd); KEEP=1; else SCRATCH=$(mktemp -d); KEEP=0; fi
    T0=$(date +%s)
    # This machine (2 cores, shared) builds far slower than the device machine (16): wider limits here.
    export GPU_CHECK_BUILD_TIMEOUT=${GPU_CHECK_BUILD_TIMEOUT:-1800} GPU_CHECK_CHECK_TIMEOUT=${GPU_CHECK_CHECK_TIMEOUT:-900}
    echo "[local] scratch $SCRATCH"
    # The roofline rows skip here (no GPU): a CPU-sized decoder takes the Llama-3.2-1B one's path through the bundle.
    PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" "$PY" "$HERE/bundle.py" "$SCRATCH/bundle" --anywhere --roofline-shape tiny
    CALLS=$(ls -d "$SCRATCH"/bundle/call[0-9]* | wc -l)
    for N in $(seq 1 "$CALLS"); do
      echo "[local] call $N of $CALLS"
      "$PY" "$HERE/device.py" --call "$N" "$SCRATCH/bundle" --root "$SCRATCH/device" --out "$SCRATCH/out" --local
    done
    "$PY" "$HERE/local_verdict.py" "$SCRATCH/out"
    # A machine gone cold between calls: the last call must refuse, delete the stash and exit 3.
    rm -rf "$SCRATCH/device/pieces" "$SCRATCH/device/files"
    set +e
    "$PY" "$HERE/device.py" --call "$CALLS" "$SCRATCH/bundle" --root "$SCRATCH/device" --out "$SCRATCH/cold" --local
    RC=$?
    set -e
    if [ "$RC" -ne 3 ] || [ -e "$SCRATCH/device" ]; then
      echo "[local] FAILED: a call after a cold start exited $RC (expected 3) or left its stash behind" >&2
      exit 1
    fi
    echo "[local] cold machine: call $CALLS refused and deleted the stash (exit 3), as it must"
    [ "$KEEP" = 1 ] || rm -rf "$SCRATCH"
    echo "[local] passed in $(( $(date +%s) - T0 )) s"
    ;;
  *) usage ;;
esac
