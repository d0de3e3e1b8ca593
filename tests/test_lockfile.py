"""The lock file (requirements/dev.txt) covers what pyproject.toml declares, and the audit reads its answers right.

No network: the lock is read as text, and the audit script (scripts/audit.py) is run against pip-audit's and
npm's reports as they look when there is a finding, when the service is unreachable and when all is well.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from scripts import audit

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements" / "dev.txt"
LOCK_INPUT = ROOT / "requirements" / "dev.in"
# The platform the lock is made for (Makefile: LOCK_PYTHON, LOCK_PLATFORM): CI's.
CI_ENV = {
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
    "python_version": "3.11",
    "python_full_version": "3.11.7",
    "platform_python_implementation": "CPython",
    "implementation_name": "cpython",
}
NOT_LOCKED = {"llama-cpp-python"}  # built from source by `make llama` (requirements/dev.in says why)


def declared() -> list[Requirement]:
    """What `make dev` installs: the runtime dependencies, the test extra and requirements/dev.in."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    lines = [*project["dependencies"], *project["optional-dependencies"]["test"]]
    lines += [line for line in LOCK_INPUT.read_text(encoding="utf-8").splitlines() if line and line[0] != "#"]
    return [req for req in map(Requirement, lines) if req.marker is None or req.marker.evaluate(CI_ENV)]


def test_every_declared_dependency_is_locked_at_a_version_it_allows() -> None:
    pins = {canonicalize_name(name): version for name, version in audit.locked_pins(LOCK).items()}
    missing, outside = [], []
    for req in declared():
        name = canonicalize_name(req.name)
        if name in NOT_LOCKED:
            continue
        if name not in pins:
            missing.append(str(req))
        elif not req.specifier.contains(pins[name], prereleases=True):
            outside.append(f"{req} (locked: {pins[name]})")
    assert not missing, f"not in {LOCK.name} (run `make lock`): {missing}"
    assert not outside, f"locked at a version the requirement excludes (run `make lock`): {outside}"
    assert not NOT_LOCKED & set(pins), "llama-cpp-python is built by `make llama`, never installed from the lock"


def test_every_pin_is_exact_and_hashed() -> None:
    """`pip install --require-hashes` refuses a lock with a loose or unhashed line; say which one here."""
    text = LOCK.read_text(encoding="utf-8")
    entries = re.split(r"\n(?=[A-Za-z0-9])", text.split("\n", 2)[2])  # past the two header comment lines
    assert len(entries) == len(audit.locked_pins(LOCK)) > 100
    for entry in entries:
        assert re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*==\S+ \\\n", entry), entry[:120]
        assert "--hash=sha256:" in entry, entry[:120]


def test_every_ignored_vulnerability_is_documented_with_its_reason() -> None:
    security = (ROOT / "docs" / "security.md").read_text(encoding="utf-8")
    for vuln, reason in audit.IGNORED.items():
        assert reason.strip(), vuln
        assert vuln in security, f"{vuln} is ignored by scripts/audit.py but not listed in docs/security.md"


def fake_tools(
    monkeypatch: pytest.MonkeyPatch, pip_report: dict[str, Any] | None, npm_report: dict[str, Any]
) -> list[list[str]]:
    """pip-audit writes `pip_report` (None: fails as without network), npm audit prints `npm_report`."""
    calls: list[list[str]] = []

    def run(command: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        calls.append(command)
        if "pip_audit" in command:
            if pip_report is None:
                return subprocess.CompletedProcess(command, 1, "", "Traceback ...\nConnectionError: no route to pypi")
            Path(command[command.index("--output") + 1]).write_text(json.dumps(pip_report), encoding="utf-8")
            return subprocess.CompletedProcess(command, 0, "", "")
        return subprocess.CompletedProcess(command, 0, json.dumps(npm_report), "")

    monkeypatch.setattr(subprocess, "run", run)
    monkeypatch.setattr(shutil, "which", lambda _: "/usr/bin/npm")
    return calls


CLEAN_NPM = {"metadata": {"dependencies": {"total": 20}}, "vulnerabilities": {}}


def test_audit_passes_when_every_package_was_checked(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    report = {"dependencies": [{"name": "aiohttp", "version": "3.14.5", "vulns": []}], "fixes": []}
    calls = fake_tools(monkeypatch, report, CLEAN_NPM)
    assert audit.main([]) == 0
    assert "no known vulnerability" in capsys.readouterr().out
    pip_audit = calls[0]
    assert pip_audit[pip_audit.index("--vulnerability-service") + 1] == "pypi" and "--no-deps" in pip_audit
    assert len(calls) == 1 + len(audit.NODE_LOCKS)


def test_a_finding_fails_with_its_fix(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    vuln = {"id": "GHSA-xxxx-yyyy-zzzz", "fix_versions": ["3.14.6"], "aliases": [], "description": ""}
    report = {"dependencies": [{"name": "aiohttp", "version": "3.14.5", "vulns": [vuln]}], "fixes": []}
    fake_tools(monkeypatch, report, CLEAN_NPM)
    assert audit.main(["--unchecked", "warn"]) == 1  # warn is about unchecked packages, never findings
    out = capsys.readouterr().out
    assert "VULNERABLE aiohttp 3.14.5: GHSA-xxxx-yyyy-zzzz (fixed in: 3.14.6)" in out


def test_an_npm_finding_fails(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    report: dict[str, Any] = {"dependencies": [], "fixes": []}
    npm = {**CLEAN_NPM, "vulnerabilities": {"zod": {"severity": "high", "range": "<3.22.3", "fixAvailable": True}}}
    fake_tools(monkeypatch, report, npm)
    assert audit.main([]) == 1
    assert "VULNERABLE tests/node: zod (high, <3.22.3; fix available: True)" in capsys.readouterr().out


@pytest.mark.parametrize("reachable", [True, False], ids=["no-data-for-versions", "unreachable"])
def test_an_audit_that_could_not_be_done_fails_clearly_or_warns(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], reachable: bool
) -> None:
    skipped = {"name": "aiohttp", "skip_reason": "Dependency not found on PyPI and could not be audited"}
    report: dict[str, Any] | None = {"dependencies": [skipped], "fixes": []} if reachable else None
    npm_error = {"message": "405 Method Not Allowed - POST .../advisories/bulk", "error": {"summary": ""}}
    fake_tools(monkeypatch, report, npm_error)
    assert audit.main([]) == 2
    err = capsys.readouterr().err
    assert "NOT DONE" in err and "405 Method Not Allowed" in err
    assert ("no vulnerability data for 1 of" in err) if reachable else ("no route to pypi" in err)
    assert audit.main(["--unchecked", "warn"]) == 0
    assert "warning only" in capsys.readouterr().err
