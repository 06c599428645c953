#!/usr/bin/env bash
# Builds et_tensorrt._C and et_tensorrt.format._reader (the blob reader) with AddressSanitizer +
# UndefinedBehaviorSanitizer in its own CMake build dir (build/cmake-asan; never the lead's build/cmake-Release or the
# package's in-tree .so) and runs the binding tests (tests/tensor) and the reliability tests against them.
#
#   scripts/sanitize.sh            # configure + build + test
#   SANITIZE_SKIP_BUILD=1 scripts/sanitize.sh   # reuse the last sanitized build
#   SANITIZE_TESTS="tests/tensor" scripts/sanitize.sh   # choose what to run
#
# How the sanitized module is imported: the package's Python files are copied into a temp dir together
# with the sanitized .so files, and that dir goes first on PYTHONPATH (so `import et_tensorrt` finds them).
# libasan must be loaded first (LD_PRELOAD) because python itself is not instrumented. detect_leaks=0:
# CPython and torch leak by design at exit. Any ASan/UBSan report makes the run fail (exit code 66 for
# ASan, -fno-sanitize-recover for UBSan aborts on the first finding).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build/cmake-asan"
SAN="${ET_TENSORRT_SANITIZE:-address,undefined}"
PKG_DIR="${SANITIZE_PKG_DIR:-$(mktemp -d /tmp/et_tensorrt_asan.XXXXXX)}"
OUT_DIR="$BUILD/out"      # where CMake writes the sanitized _C*.so (not the source tree)
TESTS="${SANITIZE_TESTS:-tests/tensor tests/reliability}"
PY="${PYTHON:-python}"

if [[ -z "${SANITIZE_SKIP_BUILD:-}" ]]; then
  mkdir -p "$BUILD" "$OUT_DIR"
  # The same -D variables setup.py passes (cmake_args.py), with the sanitizer switch and our own
  # output dir.
  mapfile -t ARGS < <("$PY" "$ROOT/cmake_args.py" "$OUT_DIR" RelWithDebInfo "$SAN")
  GEN=()
  command -v ninja >/dev/null && GEN=(-GNinja)
  # -fno-sanitize-recover: a UBSan finding aborts (and fails the run) instead of scrolling past.
  cmake -S "$ROOT" -B "$BUILD" "${GEN[@]}" "${ARGS[@]}" "-DCMAKE_CXX_FLAGS=-fno-sanitize-recover=all"
  cmake --build "$BUILD" -j "${MAX_JOBS:-$(nproc)}"
fi

SO=$(ls "$OUT_DIR"/_C*.so)
READER=$(ls "$OUT_DIR"/format/_reader*.so)  # the blob reader Python parses blobs with (linked into _C too)
echo "sanitized modules: $SO $READER"
rm -rf "$PKG_DIR/et_tensorrt"
mkdir -p "$PKG_DIR"
# Python files only (no in-tree .so), then the sanitized ones.
(cd "$ROOT" && find et_tensorrt -name '*.py' -o -name '*.json' | while read -r f; do
   mkdir -p "$PKG_DIR/$(dirname "$f")"; cp "$f" "$PKG_DIR/$f"; done)
cp "$SO" "$PKG_DIR/et_tensorrt/"
cp "$READER" "$PKG_DIR/et_tensorrt/format/"

LIBASAN="$(gcc -print-file-name=libasan.so)"
LIBUBSAN="$(gcc -print-file-name=libubsan.so)"
export LD_PRELOAD="$LIBASAN"
[[ "$SAN" == *undefined* ]] && LD_PRELOAD="$LD_PRELOAD:$LIBUBSAN"
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=0:exitcode=66:halt_on_error=1:detect_odr_violation=0:allocator_may_return_null=1:${EXTRA_ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export PYTHONPATH="$PKG_DIR${PYTHONPATH:+:$PYTHONPATH}"
export ET_TENSORRT_SANITIZED=1

# Run from the temp dir: python puts the working directory first on sys.path, so from the repository
# root the in-tree (unsanitized) package would win over PYTHONPATH.
cd "$PKG_DIR"
"$PY" -c "import et_tensorrt, et_tensorrt.format._reader as r, sys; f = [et_tensorrt._C.__file__, r.__file__]; print('imported', f); sys.exit(0 if all(p.startswith('$PKG_DIR') for p in f) else 1)"
# Several reliability files lower models (slow under ASan); -x: stop at the first failure.
# shellcheck disable=SC2086
ABS_TESTS=()
for t in $TESTS; do ABS_TESTS+=("$ROOT/$t"); done
"$PY" -m pytest "${ABS_TESTS[@]}" -q -x -p no:cacheprovider --rootdir="$ROOT" -c "$ROOT/pyproject.toml" "$@"
echo "sanitized run passed: $TESTS"
