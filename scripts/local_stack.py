"""Start and stop the local stack (a llama.cpp model server, a toolshim proxy) as child processes.

Used by ``demo/agent.py``, ``tests/realmodel/`` and ``bench/local_model.py``; the install and fetch
steps live in ``scripts/local_model.py``. Every service listens on loopback only, logs to its own
temporary file (shown when it fails to start) and is stopped with SIGTERM, then SIGKILL.

Readiness is real, not a sleep: the model server must list its model *and* produce one token (a
build whose native code crashes on the first matrix multiply is caught here, with the log tail),
and toolshim must answer ``GET /healthz``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from scripts.local_model import (
    DEFAULT_MODEL,
    LocalModelError,
    model_path,
    server_command,
    spec_for,
    stop_process,
    tail,
    verified,
)

WaitCallback = Callable[[float], None]


@dataclass(frozen=True, slots=True)
class Service:
    """A child process this process started: what it is, where it listens, where it logs."""

    name: str
    proc: subprocess.Popen[bytes]
    port: int
    log_path: Path
    model_id: str = ""
    files: tuple[Path, ...] = ()

    @property
    def root(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible root, ``http://127.0.0.1:PORT/v1``."""
        return f"{self.root}/v1"

    def log_tail(self, lines: int = 25) -> str:
        """The end of the service's log, for error messages."""
        return tail(self.log_path, lines)


def free_port() -> int:
    """A TCP port on loopback that was free a moment ago (bind to port 0 and ask)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def http_json(url: str, body: Mapping[str, Any] | None = None, timeout: float = 2.0) -> Any:
    """GET (or POST ``body`` as JSON) and decode the JSON answer; raises on any failure."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as resp:  # loopback URLs we built ourselves
        return json.loads(resp.read() or b"null")


def wait_ready(service: Service, path: str, *, timeout: float, on_wait: WaitCallback | None = None) -> None:
    """Poll ``GET path`` until it answers 2xx; fail fast with the log tail if the process exits."""
    started = time.monotonic()
    while True:
        with contextlib.suppress(urllib.error.URLError, OSError, ValueError):
            http_json(service.root + path)
            return
        elapsed = time.monotonic() - started
        if service.proc.poll() is not None:
            raise LocalModelError(
                f"{service.name} exited with code {service.proc.returncode} before it answered "
                f"{path}; its log ends:\n{service.log_tail()}"
            )
        if elapsed > timeout:
            raise LocalModelError(
                f"{service.name} did not answer {path} within {timeout:.0f} s; its log ends:\n{service.log_tail()}"
            )
        if on_wait is not None:
            on_wait(elapsed)
        time.sleep(0.25)


def spawn(
    name: str,
    cmd: Sequence[str],
    port: int,
    *,
    model_id: str = "",
    files: tuple[Path, ...] = (),
    env: Mapping[str, str] | None = None,
) -> Service:
    """Start ``cmd`` with stdout+stderr in a fresh temporary log file (``env`` adds variables)."""
    fd, log_name = tempfile.mkstemp(prefix=f"toolshim-{name}-{port}-", suffix=".log")
    with os.fdopen(fd, "wb") as log_file:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            env={**os.environ, **env} if env else None,
        )
    return Service(name=name, proc=proc, port=port, log_path=Path(log_name), model_id=model_id, files=files)


def stop(service: Service, *, keep_log: bool = False) -> None:
    """Stop a service and delete its temporary files (the log survives when the caller shows it)."""
    stop_process(service.proc)
    for path in service.files:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    if not keep_log:
        service.log_path.unlink(missing_ok=True)


def start_model_server(
    model: str = DEFAULT_MODEL,
    port: int | None = None,
    *,
    threads: int = 2,
    ctx: int = 4096,
    timeout: float = 120.0,
    on_wait: WaitCallback | None = None,
) -> Service:
    """Start the llama.cpp server for a fetched model (``ctx`` tokens of context); return once it lists the
    model and can generate."""
    path = model_path(model)
    if not verified(spec_for(model), path):
        raise LocalModelError(
            f"model file missing or unverified: {path}; run `make model` "
            f"(python scripts/local_model.py fetch --model {model})"
        )
    port = port or free_port()
    command = server_command(model, port, threads=threads, ctx=ctx)
    service = spawn("llama", command, port, model_id=spec_for(model).alias)
    try:
        wait_ready(service, "/v1/models", timeout=timeout, on_wait=on_wait)
        generate_one_token(service)
    except BaseException:
        stop(service, keep_log=True)
        raise
    return service


def generate_one_token(service: Service) -> None:
    """Prove the native code can run the model (and page its weights in) before anyone relies on it."""
    body = {"model": service.model_id, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1}
    try:
        http_json(service.base_url + "/chat/completions", body, timeout=60.0)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        time.sleep(0.5)  # let a crashing process finish dying, so the message says so
        state = "running" if service.proc.poll() is None else f"exited with code {service.proc.returncode}"
        raise LocalModelError(
            f"llama.cpp server failed its first generation ({exc}); it is {state}; its log ends:\n{service.log_tail()}"
        ) from exc


def toolshim_command(rules_path: Path, port: int) -> list[str]:
    """``toolshim serve`` from this interpreter's environment (the console script, else ``-m toolshim``)."""
    script = Path(sys.executable).with_name("toolshim")
    if script.exists():
        return [str(script), "serve", "--rules", str(rules_path), "--host", "127.0.0.1", "--port", str(port)]
    found = shutil.which("toolshim")
    if found is None:
        raise LocalModelError("the `toolshim` command is not installed in this environment; run `make install`")
    return [found, "serve", "--rules", str(rules_path), "--host", "127.0.0.1", "--port", str(port)]


def start_toolshim(rules: Mapping[str, Any], port: int | None = None, *, timeout: float = 30.0) -> Service:
    """Write ``rules`` to a temporary file (JSON is valid JSON5), serve it, wait for ``/healthz``."""
    port = port or free_port()
    fd, rules_name = tempfile.mkstemp(prefix="toolshim-rules-", suffix=".json5")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(rules, fh, indent=2)
    rules_path = Path(rules_name)
    data_dir = Path(tempfile.mkdtemp(prefix="toolshim-data-"))  # stored Responses, removed with the service
    service = spawn(
        "toolshim",
        toolshim_command(rules_path, port),
        port,
        files=(rules_path, data_dir),
        env={"TOOLSHIM_DATA_DIR": str(data_dir)},
    )
    try:
        wait_ready(service, "/healthz", timeout=timeout)
    except BaseException:
        stop(service, keep_log=True)
        raise
    return service


def rules_for(
    upstream_url: str, upstream_model: str, modes: Mapping[str, str], api_key_env: str | None = None
) -> dict[str, Any]:
    """A rules document: one upstream, one exact-match rule per exposed model name -> tool_mode."""
    upstream: dict[str, Any] = {"base_url": upstream_url}
    if api_key_env:
        upstream["api_key_env"] = api_key_env
    models = [
        {"match": name, "upstream": "local", "tool_mode": mode, "upstream_model": upstream_model}
        for name, mode in modes.items()
    ]
    return {"upstreams": {"local": upstream}, "models": models}


@contextlib.contextmanager
def services_stopped_on_exit() -> Iterator[list[Service]]:
    """Collect started services; stop them all (last first) however the block ends, SIGTERM included."""
    started: list[Service] = []
    previous = signal.getsignal(signal.SIGTERM)

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield started
    finally:
        for service in reversed(started):
            stop(service)
        signal.signal(signal.SIGTERM, previous)
