#!/usr/bin/env bash
# Run ExecuTorch's backend test suite (from the installed executorch wheel) for our flow and
# XNNPACK side by side, then print one comparison table (scripts/summarize_suite.py).
#
#   scripts/backend_suite.sh [operators|models] [flow...]      default: operators et_tensorrt xnnpack
#
# Environment:
#   SUITE_OUT      report folder (default /tmp/et_tensorrt_suite/<suite>); one <flow>.json per flow
#   SUITE_WORKERS  pytest-xdist workers (default 2)
#   SUITE_FILTER   extra pytest -k expression (e.g. "relu or add")
#   SUITE_FILES    space-separated test files under <suite>/<operators|models>/ instead of all of them
#   PYTHON         interpreter (default python)
#
# models: needs torchvision (and torchaudio for test_torchaudio.py). A model file whose package is not
# installed is left out and named after the table, never silently. When torchvision's C++ ops cannot
# load (a CUDA wheel beside a CPU torch), scripts/suite_plugins/torchvision_op_schemas.py declares their
# schemas so its pure-Python models import (see that file).
#
# Needs pytest-xdist, pytest-json-report and pytest-timeout (the suite's per-test time limits are
# ignored without pytest-timeout). A flow's run may fail (exit != 0) and the others still run;
# the script exits non-zero when any flow had failures.
set -uo pipefail

PYTHON="${PYTHON:-python}"
which_suite="${1:-operators}"
shift || true
case "$which_suite" in
  operators|models) ;;
  *) echo "usage: $0 [operators|models] [flow...]" >&2; exit 2 ;;
esac
flows=("$@")
[ ${#flows[@]} -eq 0 ] && flows=(et_tensorrt xnnpack)

missing=$("$PYTHON" - <<'PY'
import importlib.util
need = {"xdist": "pytest-xdist", "pytest_jsonreport": "pytest-json-report", "pytest_timeout": "pytest-timeout"}
print(" ".join(pkg for mod, pkg in need.items() if importlib.util.find_spec(mod) is None))
PY
)
if [ -n "$missing" ]; then
  echo "error: missing pytest plugins: $missing (pip install $missing)" >&2
  exit 2
fi

suite_root=$("$PYTHON" -c "import executorch, os; print(os.path.join(executorch.__path__[0], 'backends', 'test', 'suite'))")
out="${SUITE_OUT:-/tmp/et_tensorrt_suite/$which_suite}"
workers="${SUITE_WORKERS:-2}"
mkdir -p "$out"

targets=()
not_run=()
extra=()
if [ "$which_suite" = models ]; then
  export PYTHONPATH="$(cd "$(dirname "$0")" && pwd)/suite_plugins${PYTHONPATH:+:$PYTHONPATH}"
  extra+=(-p torchvision_op_schemas)
  for pkg in torchvision torchaudio; do
    if ! "$PYTHON" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('$pkg') is None)"; then
      extra+=(--ignore="$suite_root/models/test_$pkg.py")
      not_run+=("models/test_$pkg.py: not run, $pkg is not installed")
    fi
  done
fi
if [ -n "${SUITE_FILES:-}" ]; then
  for f in $SUITE_FILES; do targets+=("$suite_root/$which_suite/$f"); done
else
  targets=("$suite_root/$which_suite/")
fi

status=0
for flow in "${flows[@]}"; do
  echo "== $which_suite / $flow -> $out/$flow.json (log $out/$flow.log)" >&2
  args=(-m pytest -c /dev/null --rootdir="$suite_root" "${targets[@]}"
        -p et_tensorrt.conformance.pytest_plugin -m "flow_$flow"
        -n "$workers" -p no:cacheprovider -q -rfE --tb=native
        --json-report --json-report-file="$out/$flow.json" --json-report-omit=collectors,log,warnings
        "${extra[@]}")
  [ -n "${SUITE_FILTER:-}" ] && args+=(-k "$SUITE_FILTER")
  start=$(date +%s)
  "$PYTHON" "${args[@]}" >"$out/$flow.log" 2>&1
  rc=$?
  echo "   exit $rc after $(( $(date +%s) - start )) s" >&2
  [ $rc -ne 0 ] && status=1
done

reports=()
for flow in "${flows[@]}"; do reports+=("$out/$flow.json"); done
"$PYTHON" "$(dirname "$0")/summarize_suite.py" "${reports[@]}"
for line in "${not_run[@]}"; do echo "$line"; done
exit $status
