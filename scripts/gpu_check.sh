#!/usr/bin/env bash
# One call on a GPU machine: install the carried wheels, build et_tensorrt._C, run scripts/gpu_check.py.
#
#   bash scripts/gpu_check.sh            # from the repository root (the working tree copied there)
#
# The GPU machine has a CUDA torch and Python but no ExecuTorch, TensorRT or ONNX, and no network: every
# wheel must travel with the working tree. Where they are looked for, first hit wins:
#   $ET_TENSORRT_WHEELS, shared/wheels, wheels
# Wanted there (cp312 / manylinux x86_64 unless pure Python):
#   executorch==1.5.1 and its dependencies (pip download executorch==1.5.1 --no-deps is NOT enough: it
#     imports ~45 small packages; `pip download executorch==1.5.1 --python-version 3.12 --only-binary=:all:
#     -d shared/wheels` on a networked machine, then delete the torch wheel it pulls in)
#   tensorrt_rtx (+ tensorrt_rtx_libs), the CUDA 13 build; onnx, onnxscript, onnxruntime (+ their deps)
#   cmake and ninja wheels if the machine has no cmake >= 3.18 (setuptools/wheel if missing)
# A missing wheel is reported and the checks that need it are skipped; nothing is downloaded.
# torch is never installed or replaced: a constraint pins the version already there.
#
# Time: the whole script stays under ~8 minutes (each stage has its own `timeout`), so a 9-minute call
# limit leaves room. Output: a table on stdout; JSON and logs under $OUT (or ./gpu_check_out).
set -u
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PY=${PYTHON:-python3}
OUTDIR=${OUT:-$ROOT/gpu_check_out}
mkdir -p "$OUTDIR"
LOG="$OUTDIR/gpu_check.log"
: >"$LOG"
T0=$(date +%s)
say() { echo "[gpu_check +$(( $(date +%s) - T0 ))s] $*" | tee -a "$LOG"; }

WHEELS=""
for d in "${ET_TENSORRT_WHEELS:-}" "$ROOT/shared/wheels" "$ROOT/wheels"; do
  if [ -n "$d" ] && [ -d "$d" ]; then WHEELS=$d; break; fi
done

say "python: $($PY --version 2>&1)   repo: $ROOT"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader 2>&1 | tee -a "$LOG"
TORCH_VERSION=$($PY -c 'import torch; print(torch.__version__)' 2>>"$LOG") || { say "FATAL: torch does not import"; exit 2; }
say "torch $TORCH_VERSION, cuda available: $($PY -c 'import torch; print(torch.cuda.is_available(), torch.version.cuda)')"

export ET_TENSORRT_CACHE_DIR=${ET_TENSORRT_CACHE_DIR:-$(mktemp -d)/engines}  # a fresh engine cache
CONSTRAINTS="$OUTDIR/constraints.txt"
echo "torch==$TORCH_VERSION" >"$CONSTRAINTS"

declare -A STATUS
install_one() {  # name, pip requirement...
  local name=$1; shift
  if [ -z "$WHEELS" ]; then STATUS[$name]="MISSING (no wheel folder)"; return 1; fi
  if timeout 150 $PY -m pip install --no-index --find-links "$WHEELS" -c "$CONSTRAINTS" \
       --disable-pip-version-check -q "$@" >>"$LOG" 2>&1; then
    STATUS[$name]="installed"
  else
    STATUS[$name]="MISSING or incomplete in $WHEELS (see $LOG)"
    return 1
  fi
}

if [ -z "$WHEELS" ]; then
  say "no wheel folder: set ET_TENSORRT_WHEELS or carry shared/wheels (see docs/gpu-check.md)"
else
  say "wheels from $WHEELS: $(ls "$WHEELS" | wc -l) files"
fi
# Build tools first (only if absent), then the runtime dependencies, each on its own so one missing
# wheel does not block the others.
$PY -c 'import setuptools, wheel' 2>/dev/null || install_one build-setuptools setuptools wheel
command -v cmake >/dev/null || install_one build-cmake cmake
command -v ninja >/dev/null || install_one build-ninja ninja
install_one executorch "executorch==1.5.1"
install_one tensorrt_rtx tensorrt_rtx
install_one onnx onnx
install_one onnxscript onnxscript
install_one onnxruntime onnxruntime
for k in "${!STATUS[@]}"; do say "wheel $k: ${STATUS[$k]}"; done

BUILD="not attempted"
if $PY -c 'import executorch' 2>/dev/null; then
  say "building et_tensorrt._C (pip install --no-build-isolation --no-deps -e .)"
  rm -f et_tensorrt/_C.*.so.stale 2>/dev/null
  if MAX_JOBS=${MAX_JOBS:-$(nproc)} timeout 330 $PY -m pip install --no-build-isolation --no-deps \
       --disable-pip-version-check -e . >>"$LOG" 2>&1; then
    BUILD="ok"
  else
    BUILD="FAILED (tail of $LOG below)"
    tail -40 "$LOG"
  fi
else
  BUILD="skipped: executorch is not installed (its headers and libexecutorch.so are needed)"
fi
say "build: $BUILD"

REMAINING=$(( 500 - ($(date +%s) - T0) ))
[ "$REMAINING" -lt 60 ] && REMAINING=60
say "running scripts/gpu_check.py (limit ${REMAINING}s)"
timeout "$REMAINING" $PY scripts/gpu_check.py --json "$OUTDIR/gpu_check.json" --build "$BUILD" 2>>"$LOG"
RC=$?
say "gpu_check.py exit $RC (0: every check that could run passed; 1: a check failed; 124: timeout)"
exit $RC
