"""The release as a new user gets it: the wheel, installed into a fresh venv, run from an empty directory.

The wheel is built (``pip wheel --no-deps --no-build-isolation``, offline) from exactly what
deploy/Dockerfile's builder stage copies, and installed with pip into a new venv that has no
site-packages of the test environment. Its dependencies are the closure of the wheel's own
``Requires-Dist`` (no extras), each version checked against the requirement and linked from this
environment's installed copy: offline and a few seconds, where downloading them took about 30 s
here and needs the network; and nothing else is there, so an import the wheel does not declare
fails, and litellm (an extra) is missing as it is after a plain ``pip install toolshim``. Every
process runs with an empty HOME, an empty working directory and no ``PYTHONPATH`` or
``TOOLSHIM_*`` variables but the ones a step sets.
"""

from __future__ import annotations

import asyncio
import email
import importlib.metadata
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
import zipfile
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.conftest import free_port
from tests.deploy.files import DOCKERFILE, ROOT, dockerfile_env
from tests.deploy.parsing import copies, exec_form, parse_dockerfile
from tests.fakes import FakeUpstream, Reply, completion

WEATHER = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]
LITELLM_RULES = (
    '{upstreams: {claude: {provider: "litellm", api_key_env: "ANTHROPIC_API_KEY"}},\n'
    ' models: [{match: "*", upstream: "claude", upstream_model: "anthropic/claude-sonnet-4-5"}]}'
)
LOCAL_CODER_URL = "http://127.0.0.1:8080/v1"  # where the packaged rules send "local-coder" (make serve-model)
HOSTED_URL = "https://api.openai.com/v1"  # GET /v1/models would ask it for its list: the test stays offline


@dataclass(frozen=True)
class Release:
    wheel: Path
    venv: Path
    site_packages: Path
    home: Path  # empty; HOME of every process

    @property
    def bin(self) -> Path:
        return self.venv / "bin"

    def env(self, **extra: str) -> dict[str, str]:
        """A fresh shell's environment with the venv activated: nothing of this test run leaks in."""
        keep = {k: v for k, v in os.environ.items() if k in ("LANG", "LC_ALL", "TMPDIR")}
        path = os.pathsep.join([str(self.bin), "/usr/local/bin", "/usr/bin", "/bin"])
        return {**keep, "PATH": path, "HOME": str(self.home), "VIRTUAL_ENV": str(self.venv), **extra}

    def run(self, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
        command = [str(self.bin / "toolshim"), *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=cwd, env=self.env())


def _pip_env(home: Path) -> dict[str, str]:
    """pip without this machine's configuration (its indexes, find-links, constraints): offline and plain."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON", "TOOLSHIM_"))}
    return {**env, "HOME": str(home), "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def _builder_sources(dest: Path) -> None:
    """The files deploy/Dockerfile's builder stage copies, laid out as its COPYs lay them out."""
    parsed = parse_dockerfile(DOCKERFILE.read_text(encoding="utf-8"))
    for copy in copies(parsed):
        if copy.stage != parsed.stages[0] or copy.from_stage is not None:
            continue
        target = dest / copy.dest
        for source in copy.sources:
            path = ROOT / source
            if path.is_dir():  # COPY dir/ dest/: the folder's contents, symlinks kept as links
                ignore = shutil.ignore_patterns("__pycache__", "*.py[co]")
                shutil.copytree(path, target, symlinks=True, ignore=ignore, dirs_exist_ok=True)
            else:
                target.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target / path.name)


def _build_wheel(work: Path, home: Path) -> Path:
    src, out = work / "src", work / "wheelhouse"
    _builder_sources(src)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index", "-w", out, src],
        check=True,
        env=_pip_env(home),
        cwd=work,
        timeout=300,
    )
    (wheel,) = out.glob("toolshim-*.whl")
    return wheel


def _requirements(dist: importlib.metadata.Distribution, extras: frozenset[str]) -> Iterator[Requirement]:
    """The distribution's requirements that apply here, for the given extras (none: the plain install)."""
    for line in dist.requires or ():
        req = Requirement(line)
        if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in (extras or {""})):
            yield req


def _closure(wheel_metadata: str) -> list[importlib.metadata.Distribution]:
    """This environment's distributions that satisfy the wheel's Requires-Dist, transitively, each checked."""
    pending = [Requirement(line) for line in email.message_from_string(wheel_metadata).get_all("Requires-Dist") or ()]
    pending = [r for r in pending if r.marker is None or r.marker.evaluate({"extra": ""})]
    found: dict[str, importlib.metadata.Distribution] = {}
    while pending:
        req = pending.pop()
        dist = importlib.metadata.distribution(req.name)
        version = dist.version
        assert req.specifier.contains(version, prereleases=True), f"{req}: this environment has {version}"
        name = canonicalize_name(dist.metadata["Name"])
        if name not in found:
            found[name] = dist
            pending.extend(_requirements(dist, frozenset(req.extras)))
        elif req.extras:
            pending.extend(_requirements(dist, frozenset(req.extras)))
    return list(found.values())


def _link_installed(dists: list[importlib.metadata.Distribution], site_packages: Path) -> None:
    """Each distribution's installed files, hard-linked (copied across file systems) into ``site_packages``."""
    for dist in dists:
        base = Path(str(dist.locate_file("")))
        for file in dist.files or ():
            if file.parts[0] == ".." or "__pycache__" in file.parts:  # scripts outside site-packages; bytecode
                continue
            source, target = base / file, site_packages / file
            if target.exists() or not source.is_file():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(source, target)
            except OSError:
                shutil.copy2(source, target)


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Release:
    """toolshim's wheel in a fresh venv with exactly its declared dependencies."""
    root = tmp_path_factory.mktemp("release")
    home, build = root / "home", root / "build"
    for folder in (home, build):
        folder.mkdir()
    wheel = _build_wheel(build, home)
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, env=_pip_env(home), timeout=60)
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python")]
    subprocess.run(
        [*pip, "install", "-q", "--no-deps", "--no-index", wheel], check=True, env=_pip_env(home), timeout=120
    )
    paths = subprocess.run(
        [venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
        env={"HOME": str(home)},
    )
    site_packages = Path(paths.stdout.strip())
    assert site_packages != Path(sysconfig.get_paths()["purelib"])
    with zipfile.ZipFile(wheel) as archive:
        metadata = archive.read(next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    _link_installed(_closure(metadata), site_packages)
    return Release(wheel, venv, site_packages, home)


def test_the_wheel_carries_the_default_rules_the_license_and_no_litellm(release: Release) -> None:
    with zipfile.ZipFile(release.wheel) as archive:
        names = archive.namelist()
        assert archive.read("toolshim/config/default_rules.json5") == (ROOT / "rules" / "default.json5").read_bytes()
        (license_file,) = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        assert archive.read(license_file) == (ROOT / "LICENSE").read_bytes()
        metadata = email.message_from_bytes(archive.read(license_file.replace("licenses/LICENSE", "METADATA")))
    assert metadata["License-Expression"] == "MIT"
    plain = [r for r in map(Requirement, metadata.get_all("Requires-Dist") or ()) if "extra" not in str(r.marker)]
    assert plain and all(canonicalize_name(r.name) != "litellm" for r in plain)
    installed = release.site_packages / "toolshim" / "config" / "default_rules.json5"
    assert installed.is_file() and not installed.is_symlink()
    probe = "import importlib.util as u; print([m for m in ('litellm', 'pytest', 'openai') if u.find_spec(m)])"
    found = subprocess.run([release.bin / "python", "-c", probe], capture_output=True, text=True, env=release.env())
    assert found.stdout.strip() == "[]", "the venv must see only toolshim and its declared dependencies"


async def _wait_ready(url: str, proc: asyncio.subprocess.Process) -> None:
    deadline = time.monotonic() + 30
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            if proc.returncode is not None:
                _, err = await proc.communicate()
                raise AssertionError(f"toolshim exited with {proc.returncode}:\n{err.decode()}")
            try:
                async with session.get(url + "/readyz") as resp:
                    if resp.status == 200:
                        return
            except aiohttp.ClientConnectionError:
                pass
            await asyncio.sleep(0.1)
    raise AssertionError("toolshim did not become ready in time")


async def _start(release: Release, cwd: Path, command: list[str], env: Mapping[str, str]) -> asyncio.subprocess.Process:
    """``command`` as a shell with the venv activated runs it: its first word looked up on the PATH."""
    program = shutil.which(command[0], path=env["PATH"])
    assert program is not None and Path(program).parent == release.bin, f"{command[0]} resolves to {program}"
    pipe = asyncio.subprocess.PIPE
    return await asyncio.create_subprocess_exec(program, *command[1:], cwd=cwd, env=dict(env), stdout=pipe, stderr=pipe)


@pytest.fixture
def cwd(tmp_path: Path) -> Path:
    """An empty working directory."""
    path = tmp_path / "cwd"
    path.mkdir()
    return path


async def _stop(proc: asyncio.subprocess.Process) -> str:
    """SIGTERM (the drain), then the process's log; it must exit 0 without a traceback."""
    proc.send_signal(signal.SIGTERM)
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    logs = err.decode()
    assert proc.returncode == 0, logs
    assert "Traceback" not in logs, logs
    return logs


@pytest.fixture
async def killed_at_end() -> AsyncIterator[list[asyncio.subprocess.Process]]:
    procs: list[asyncio.subprocess.Process] = []
    yield procs
    for proc in procs:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_bare_install_serves_the_packaged_rules(
    release: Release, cwd: Path, killed_at_end: list[asyncio.subprocess.Process]
) -> None:
    """``pip install toolshim`` + ``toolshim serve``: no rules named, none in the working directory."""
    checked = release.run(cwd, "check-rules")
    assert checked.returncode == 0, checked.stderr
    packaged = release.site_packages / "toolshim" / "config" / "default_rules.json5"
    assert "local-coder" in checked.stdout and f"({packaged})" in checked.stdout
    port = free_port()
    proc = await _start(release, cwd, ["toolshim", "serve", "--port", str(port)], release.env())
    killed_at_end.append(proc)
    url = f"http://127.0.0.1:{port}"
    await _wait_ready(url, proc)  # no /v1/models here: it would ask api.openai.com (the rule for gpt-*)
    logs = await _stop(proc)
    assert f"rules {packaged}" in logs


async def test_container_command_serves_chat_and_stored_responses(
    release: Release,
    cwd: Path,
    fake_upstream: FakeUpstream,
    killed_at_end: list[asyncio.subprocess.Process],
    tmp_path: Path,
) -> None:
    """deploy/Dockerfile's ENTRYPOINT + CMD with its ENV, its baked rules (llama.cpp's and OpenAI's upstreams
    pointed at a fake, as an operator mounting their own copy would) and its HEALTHCHECK; no Docker needed."""
    parsed = parse_dockerfile(DOCKERFILE.read_text(encoding="utf-8"))
    runtime = parsed.stages[-1]
    image_env = dockerfile_env()
    rules_dir, metrics_dir = tmp_path / "etc-toolshim-rules", tmp_path / "metrics"
    rules_dir.mkdir()
    metrics_dir.mkdir()  # the image creates it
    for copy in copies(parsed):
        if copy.stage == runtime and copy.from_stage is None and copy.dest.startswith(image_env["TOOLSHIM_RULES"]):
            (source,) = copy.sources
            baked = (ROOT / source).read_text(encoding="utf-8")
            assert LOCAL_CODER_URL in baked and HOSTED_URL in baked
            baked = baked.replace(LOCAL_CODER_URL, fake_upstream.url).replace(HOSTED_URL, fake_upstream.url)
            (rules_dir / Path(copy.dest).name).write_text(baked)
    assert list(rules_dir.iterdir()), "the image bakes a rules file into TOOLSHIM_RULES"
    port, key = free_port(), "sk-release-check"
    env = release.env(
        **{
            **image_env,
            "TOOLSHIM_RULES": str(rules_dir),
            "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir),
            "TOOLSHIM_PORT": str(port),
            "TOOLSHIM_API_KEYS": key,  # as deploy/README's `docker run -e TOOLSHIM_API_KEYS=...`
        }
    )
    entry = exec_form(parsed.of("ENTRYPOINT")[-1].args) or []
    cmd = exec_form(parsed.of("CMD")[-1].args) or []
    proc = await _start(release, cwd, [*entry, *cmd], env)
    killed_at_end.append(proc)
    url = f"http://127.0.0.1:{port}"
    await _wait_ready(url, proc)

    health = exec_form(parsed.of("HEALTHCHECK")[-1].args.split("CMD", 1)[1].strip()) or []
    probe = await _start(release, cwd, health, env)
    assert await asyncio.wait_for(probe.wait(), 30) == 0

    auth = {"Authorization": f"Bearer {key}"}
    async with aiohttp.ClientSession(headers=auth) as session:
        async with session.get(url + "/v1/models") as resp:
            assert resp.status == 200
            assert "local-coder" in [card["id"] for card in (await resp.json())["data"]]

        fake_upstream.script(  # local-coder speaks hermes (rules/default.json5)
            Reply(body=completion('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'))
        )
        ask = {"model": "local-coder", "messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": WEATHER}
        async with session.post(url + "/v1/chat/completions", json=ask) as resp:
            assert resp.status == 200, await resp.text()
            (call,) = (await resp.json())["choices"][0]["message"]["tool_calls"]
        assert call["function"]["name"] == "get_weather"
        assert json.loads(call["function"]["arguments"]) == {"city": "Paris"}
        assert fake_upstream.requests[-1]["model"] == "qwen2.5-coder-0.5b"  # the rule's upstream_model

        fake_upstream.script(Reply(body=completion("Sunny, 21 C.")))
        async with session.post(url + "/v1/responses", json={"model": "local-coder", "input": "Weather?"}) as resp:
            assert resp.status == 200, await resp.text()
            created: dict[str, Any] = await resp.json()
        assert created["store"] is True and created["status"] == "completed"
        async with session.get(f"{url}/v1/responses/{created['id']}") as resp:
            assert resp.status == 200, await resp.text()
            stored = await resp.json()
        assert stored["id"] == created["id"] and stored["output"] == created["output"]
        assert "Sunny, 21 C." in str(stored["output"])
    assert (cwd / "toolshim-data").is_dir()  # the default data dir, created in the working directory
    await _stop(proc)


@pytest.mark.parametrize("command", [["serve", "--workers", "3"], ["check-rules"]], ids=["serve-3-workers", "check"])
def test_a_litellm_upstream_without_litellm_is_one_line_and_a_failure(
    release: Release, cwd: Path, tmp_path: Path, command: list[str]
) -> None:
    rules = tmp_path / "litellm.json5"
    rules.write_text(LITELLM_RULES)
    started = time.monotonic()
    where = ["--rules", str(rules), "--port", str(free_port())] if command[0] == "serve" else [str(rules)]
    result = release.run(cwd, *command, *where)
    assert result.returncode == 2, result.stderr
    assert time.monotonic() - started < 20, "no worker may start, fail and be restarted"
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "upstreams.claude: provider 'litellm' needs the litellm package" in lines[0]
    assert "pip install 'toolshim[litellm]'" in lines[0] and "Traceback" not in result.stderr
