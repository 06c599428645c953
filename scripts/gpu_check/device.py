"""One device call of the GPU check: stash this call's pieces, then run every step whose inputs are complete.

    python3 scripts/gpu_check/device.py --call N [DIR] [--root R] [--out O] [--local]

DIR is the bundle folder (default .gpucheck; the call reads DIR/callN). The stash and everything built from
it live under R (default /tmp/et_trt_gpucheck, outside the repository copy). Results go to O (default $OUT,
else ./gpu_check_out): callN.json (steps, times, environment), build.log, gpu_check.json (the checks).

Steps, each run once, in this order, as soon as its inputs have arrived (see transport.py for the stash):
  sources     the working tree's sources, checked against the bundle's SHA-256s, copied to R/prefix/src
  executorch  the ExecuTorch runtime (headers, libexecutorch.so, kernels) unpacked to R/prefix/site
  build       et_tensorrt._C and format._reader built in R/prefix/src against this machine's torch and ExecuTorch
  tensorrt    TensorRT-RTX (libraries, cp312 bindings, Python package) unpacked to R/prefix/site
  programs    the .pte files and references unpacked to R/prefix/programs
  check       scripts/gpu_check/checks.py with PYTHONPATH=R/prefix/src:R/prefix/site (runtime only)

Exit status: 0 every step of this call succeeded (the last call: and no check failed); 1 a step or check
failed; 3 the machine went cold between calls (the stash was deleted: start again with call 1); 4 a piece
did not match its checksum (send the same call again).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))

import transport  # noqa: E402  (after the sys.path line above)

DEFAULT_ROOT = Path("/tmp/et_trt_gpucheck")
# Sized for the device calls' timeouts (docs/gpu-check.md); --local raises them for a loaded 2-core machine.
BUILD_TIMEOUT_S = int(os.environ.get("GPU_CHECK_BUILD_TIMEOUT", "300"))
CHECK_TIMEOUT_S = int(os.environ.get("GPU_CHECK_CHECK_TIMEOUT", "180"))
EXIT_OK, EXIT_FAILED, EXIT_COLD, EXIT_TRANSFER = 0, 1, 3, 4
STEPS = ("sources", "executorch", "build", "tensorrt", "programs", "check")
NEEDS = {  # step -> (earlier steps, bundle files by role)
    "sources": ((), ()),
    "executorch": ((), ("executorch",)),
    "build": (("sources", "executorch"), ()),
    "tensorrt": ((), ("tensorrt_python", "tensorrt_bindings", "tensorrt_libs")),
    "programs": ((), ("programs",)),
    "check": (("build", "tensorrt", "programs"), ()),
}


def say(message: str) -> None:
    print(f"[gpu_check {time.strftime('%H:%M:%S')}] {message}", flush=True)


class StepFailed(Exception):
    pass


def run_group(cmd: list[str], timeout: int, **kwargs) -> int:
    """Run ``cmd`` in a process group of its own; on timeout kill the whole group (a build's compilers too)."""
    proc = subprocess.Popen(cmd, start_new_session=True, **kwargs)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise


def unzip_checked(archive: Path, dest: Path, keep) -> list[str]:
    """Extract the members ``keep(name)`` selects, each checked against the archive's RECORD."""
    with zipfile.ZipFile(archive) as z:
        record = next((n for n in z.namelist() if n == "RECORD" or n.endswith(".dist-info/RECORD")), None)
        if record is None:
            raise StepFailed(f"{archive.name} has no RECORD to check its members against")
        hashes = transport.record_hashes(z.read(record).decode())
        names = [n for n in z.namelist() if keep(n) and not n.endswith("/")]
        if not names:
            raise StepFailed(f"{archive.name} holds none of the files wanted")
        for name in names:
            data = z.read(name)
            if hashlib.sha256(data).hexdigest() != hashes.get(name):
                raise StepFailed(f"{archive.name}: {name} does not match its RECORD")
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    return names


class Call:
    def __init__(self, args):
        self.args = args
        self.call = args.call
        self.out = Path(args.out or os.environ.get("OUT") or "gpu_check_out").resolve()
        self.out.mkdir(parents=True, exist_ok=True)
        self.call_dir = (args.dir / f"call{self.call}").resolve()
        self.manifest = transport.read_manifest(self.call_dir)
        self.stash = transport.Stash(args.root, self.manifest)
        self.report: dict = {
            "call": self.call,
            "calls": len(self.manifest["calls"]),
            "bundle_id": self.manifest["bundle_id"],
            "local": args.local,
            "environment": environment(),
            "versions": self.manifest.get("versions", {}),
            "steps": {},
        }
        self.t0 = time.perf_counter()

    @property
    def site(self) -> Path:
        return self.stash.prefix / "site"

    @property
    def src(self) -> Path:
        return self.stash.prefix / "src"

    def role(self, role: str) -> Path | None:
        return self.stash.file(self.manifest["roles"][role])

    def python_env(self, *paths: Path) -> dict:
        env = dict(os.environ)
        # Ours first; a PYTHONPATH the caller set (e.g. carried wheels in /tmp/site) stays after them.
        env["PYTHONPATH"] = os.pathsep.join([str(p) for p in paths] + [p for p in [env.get("PYTHONPATH")] if p])
        env["PYTHONUNBUFFERED"] = "1"
        env.pop("PYTHONSAFEPATH", None)
        return env

    # -- steps ---------------------------------------------------------------------------------------
    def step_sources(self) -> str:
        wrong = []
        for path, digest in self.manifest["sources"].items():
            here = REPO / path
            if not here.is_file() or transport.sha256_file(here) != digest:
                wrong.append(path)
        if wrong:
            raise StepFailed(
                f"{len(wrong)} source file(s) differ from the bundle's ({', '.join(wrong[:5])}...): the "
                "working tree changed since the bundle was made; run scripts/gpu_check.sh --bundle again"
            )
        shutil.rmtree(self.src, ignore_errors=True)
        for path in self.manifest["sources"]:
            target = self.src / path
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(REPO / path, target)
        return f"{len(self.manifest['sources'])} files match the bundle"

    def step_executorch(self) -> str:
        names = unzip_checked(self.role("executorch"), self.site, lambda n: n.startswith("executorch/"))
        return f"{len(names)} files (headers, {', '.join(n.rsplit('/', 1)[1] for n in names if n.endswith('.so'))})"

    def step_build(self) -> str:
        log_path = self.out / "build.log"
        env = self.python_env(self.site)
        env["MAX_JOBS"] = str(os.cpu_count() or 2)
        with open(log_path, "w") as log:
            try:
                returncode = run_group(
                    [sys.executable, "setup.py", "build_ext", "--inplace"],
                    BUILD_TIMEOUT_S,
                    cwd=self.src,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            except subprocess.TimeoutExpired:
                raise StepFailed(f"the build took over {BUILD_TIMEOUT_S} s (log: build.log)") from None
        if returncode != 0:
            tail = log_path.read_text(errors="replace").splitlines()[-25:]
            print("\n".join(tail), flush=True)
            raise StepFailed(f"the build failed (exit {returncode}); the last lines are above, all of it in build.log")
        package = self.src / "et_tensorrt"
        built = [next(iter(sorted(package.glob(pattern))), None) for pattern in ("_C*.so", "format/_reader*.so")]
        if None in built:
            raise StepFailed("the build reported success but et_tensorrt/_C*.so or format/_reader*.so is not there")
        return f"{', '.join(p.name for p in built)} against {torch_version()}"

    def step_tensorrt(self) -> str:
        transport.extract_tar(self.role("tensorrt_python"), self.site)
        libs = unzip_checked(self.role("tensorrt_libs"), self.site, lambda n: n.startswith("tensorrt_rtx_libs/"))
        bindings = unzip_checked(
            self.role("tensorrt_bindings"), self.site, lambda n: n.startswith("tensorrt_rtx_bindings/")
        )
        size = sum((self.site / n).stat().st_size for n in libs + bindings) / transport.MiB
        return f"{len(libs) + len(bindings)} files, {size:.0f} MiB unpacked"

    def step_programs(self) -> str:
        transport.extract_tar(self.role("programs"), self.stash.prefix)
        table = json.loads((self.stash.prefix / "programs" / "programs.json").read_text())
        return f"{len(table)} programs: {', '.join(p['name'] for p in table)}"

    def step_check(self) -> str:
        result_path = self.out / "gpu_check.json"
        cmd = [
            sys.executable,
            str(self.src / "scripts" / "gpu_check" / "checks.py"),
            "--programs",
            str(self.stash.prefix / "programs"),
            "--json",
            str(result_path),
        ]
        if not self.args.local:
            cmd.append("--require-gpu")
        env = self.python_env(self.src, self.site)
        try:
            returncode = run_group(cmd, CHECK_TIMEOUT_S, cwd=self.stash.prefix, env=env)
        except subprocess.TimeoutExpired:
            raise StepFailed(f"the checks took over {CHECK_TIMEOUT_S} s (partial rows in gpu_check.json)") from None
        if not result_path.is_file():
            raise StepFailed(f"checks.py exited {returncode} without writing {result_path.name}")
        summary = json.loads(result_path.read_text())["summary"]
        text = f"{summary['passed']} passed, {summary['failed']} failed, {summary['skipped']} skipped"
        if returncode != 0 or summary["failed"]:
            raise StepFailed(text)
        return text

    # -- the call ------------------------------------------------------------------------------------
    def ready(self, step: str) -> str:
        """'' when the step can run now, else why not."""
        steps, roles = NEEDS[step]
        for dep in steps:
            if not self.stash.step_done(dep):
                status = self.stash.steps().get(dep, {}).get("status")
                return f"waits for step {dep}" + (f" ({status})" if status else "")
        missing = [self.manifest["roles"][r] for r in roles if self.role(r) is None]
        return f"waits for {', '.join(missing)} (a later call)" if missing else ""

    def run(self) -> int:
        say(
            f"call {self.call} of {len(self.manifest['calls'])}, bundle {self.manifest['bundle_id']},"
            f" stash {self.stash.root}"
        )
        try:
            self.stash.begin(self.call)
            assembled = self.stash.add_call(self.call, self.call_dir)
        except transport.ColdMachine as e:
            say(f"COLD: {e}")
            self.report["status"] = "cold"
            self.report["message"] = str(e)
            self.finish()
            return EXIT_COLD
        except transport.TransferError as e:
            say(f"TRANSFER: {e}")
            self.report["status"] = "transfer error"
            self.report["message"] = str(e)
            self.finish()
            return EXIT_TRANSFER
        say(
            f"stashed call {self.call} ({time.perf_counter() - self.t0:.1f} s); assembled: {assembled or 'nothing yet'}"
        )
        failed = False
        for step in STEPS:
            if self.stash.step_done(step):
                continue
            why_not = self.ready(step)
            if why_not:
                self.report["steps"][step] = {"status": "pending", "detail": why_not}
                continue
            t = time.perf_counter()
            say(f"step {step} ...")
            try:
                detail = getattr(self, f"step_{step}")()
                status = "ok"
            except StepFailed as e:
                detail, status, failed = str(e), "failed", True
            except Exception as e:
                detail, status, failed = f"{type(e).__name__}: {e}", "failed", True
            seconds = round(time.perf_counter() - t, 1)
            self.stash.record_step(step, status, detail=detail, seconds=seconds)
            self.report["steps"][step] = {"status": status, "detail": detail, "seconds": seconds}
            say(f"step {step}: {status} in {seconds} s: {detail}")
        last = self.call == len(self.manifest["calls"])
        if last and not failed and not self.stash.step_done("check"):
            failed = True
            self.report["steps"].setdefault("check", {"status": "failed", "detail": "never became ready"})
        self.report["status"] = "failed" if failed else ("done" if last else "stashed")
        self.finish()
        return EXIT_FAILED if failed else EXIT_OK

    def finish(self) -> None:
        self.report["seconds"] = round(time.perf_counter() - self.t0, 1)
        (self.out / f"call{self.call}.json").write_text(json.dumps(self.report, indent=1))
        say(
            f"call {self.call}: {self.report['status']} in {self.report['seconds']} s"
            f" (report: {self.out}/call{self.call}.json)"
        )
        if self.report["status"] == "stashed":
            say(f"NEXT: send call {self.call + 1} now: what this call left here survives only ~30 s")


def torch_version() -> str:
    try:
        out = subprocess.run(
            [sys.executable, "-c", "import torch; print(torch.__version__, torch.version.cuda)"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        return out.stdout.strip() or out.stderr.strip()[-200:]
    except Exception as e:
        return f"unknown ({e})"


def environment() -> dict:
    env = {"python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count()}
    smi = shutil.which("nvidia-smi")
    if smi:
        q = subprocess.run(
            [smi, "--query-gpu=name,driver_version,memory.total,compute_cap", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=False,
        )
        env["gpu"] = q.stdout.strip() or q.stderr.strip()
    else:
        env["gpu"] = "none (no nvidia-smi)"
    return env


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--call", type=int, required=True)
    ap.add_argument("dir", nargs="?", type=Path, default=Path(".gpucheck"))
    ap.add_argument("--root", type=Path, default=DEFAULT_ROOT, help="stash and build folder (outside the repository)")
    ap.add_argument("--out", help="results folder (default $OUT)")
    ap.add_argument("--local", action="store_true", help="no GPU expected: GPU checks report 'skipped: no GPU'")
    args = ap.parse_args()
    args.root = args.root.resolve()
    return Call(args).run()


if __name__ == "__main__":
    sys.exit(main())
