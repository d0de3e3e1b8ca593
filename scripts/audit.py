"""The vulnerability audit of ``make audit`` and ``make test`` (docs/security.md, "Dependencies").

What is checked: every version pinned in the lock file (requirements/dev.txt) and llama-cpp-python at the
version ``make llama`` builds (scripts/local_model.py; it is not in the lock), with pip-audit against PyPI's
vulnerability data (its JSON API, per version); and the Node test clients' package-lock.json files with
``npm audit --omit=dev`` where npm is installed. Nothing is installed or resolved: the versions are read
from the lock files.

Exit status: 0 when every package was checked and none has a known vulnerability that IGNORED does not
name; 1 on a finding (each is printed with the versions that fix it); 2 when the audit could not be done,
wholly or for some packages (the service unreachable, or it has no answer for a version), unless
``--unchecked warn``, which prints the same message as a warning and exits 0 (``make test`` does that:
docs/security.md says why).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements" / "dev.txt"
NODE_LOCKS = (ROOT / "tests" / "node", ROOT / "tests" / "compat_node")
# A vulnerability ID (PYSEC-..., GHSA-..., CVE-...) -> why it is accepted. Each one is listed with its
# reason in docs/security.md too (tests/test_lockfile.py checks that).
IGNORED: dict[str, str] = {}
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")
TIMEOUT_S = 300  # the whole pip-audit run; each request has its own --timeout
REQUEST_TIMEOUT_S = 20


@dataclass
class Outcome:
    """What one audit found: findings fail it; unchecked packages mean it was not (wholly) done."""

    checked: int = 0
    findings: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)


def locked_pins(lock: Path = LOCK) -> dict[str, str]:
    """The lock file's ``name==version`` lines, by name as written (uv writes normalized names)."""
    pins = {}
    for line in lock.read_text(encoding="utf-8").splitlines():
        if match := PIN.match(line):
            pins[match[1]] = match[2]
    return pins


def llama_version() -> str:
    sys.path.insert(0, str(ROOT))
    from scripts.local_model import LLAMA_VERSION

    return LLAMA_VERSION


def audit_python(outcome: Outcome) -> None:
    """pip-audit over the pinned versions (hashes dropped: the service is asked by name and version only)."""
    pins = {**locked_pins(), "llama-cpp-python": llama_version()}
    with tempfile.TemporaryDirectory(prefix="toolshim-audit-") as tmp:
        requirements, report = Path(tmp) / "pins.txt", Path(tmp) / "report.json"
        requirements.write_text("".join(f"{name}=={version}\n" for name, version in pins.items()), encoding="utf-8")
        command = [
            sys.executable,
            "-m",
            "pip_audit",
            "--requirement",
            str(requirements),
            "--no-deps",
            "--disable-pip",
            "--vulnerability-service",
            "pypi",
            "--progress-spinner",
            "off",
            "--timeout",
            str(REQUEST_TIMEOUT_S),
            "--format",
            "json",
            "--output",
            str(report),
        ]
        for vuln in IGNORED:
            command += ["--ignore-vuln", vuln]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            outcome.unchecked.append(f"Python: pip-audit took over {TIMEOUT_S} s (PyPI's JSON API too slow?)")
            return
        if not report.exists():  # pip-audit writes no report when the service fails (no network, 5xx, ...)
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            outcome.unchecked.append(f"Python: pip-audit could not query PyPI's vulnerability data: {last[-300:]}")
            return
        data = json.loads(report.read_text(encoding="utf-8"))
    skipped = []
    for dep in data["dependencies"]:
        if "skip_reason" in dep:
            skipped.append(dep["name"])
            continue
        outcome.checked += 1
        for vuln in dep["vulns"]:
            fixes = ", ".join(vuln["fix_versions"]) or "no fixed version"
            outcome.findings.append(f"{dep['name']} {dep['version']}: {vuln['id']} (fixed in: {fixes})")
    outcome.ignored = list(IGNORED)  # pip-audit leaves them out of its report
    if skipped:
        shown = ", ".join(skipped[:5]) + (", ..." if len(skipped) > 5 else "")
        outcome.unchecked.append(
            f"Python: PyPI had no vulnerability data for {len(skipped)} of {len(pins)} pinned versions ({shown});"
            " its per-version JSON API (/pypi/NAME/VERSION/json) did not answer for them"
        )


def audit_node(outcome: Outcome) -> None:
    """``npm audit --omit=dev`` over each Node test client's package-lock.json (skipped without npm)."""
    npm = shutil.which("npm")
    if npm is None:
        print("audit: npm is not installed; the Node test clients' lock files are not audited (nor tested)")
        return
    for folder in NODE_LOCKS:
        name = folder.relative_to(ROOT)
        try:
            done = subprocess.run(
                [npm, "audit", "--omit=dev", "--json"],
                cwd=folder,
                capture_output=True,
                text=True,
                timeout=TIMEOUT_S,
                check=False,
            )
            data = json.loads(done.stdout or "{}")
        except (subprocess.TimeoutExpired, json.JSONDecodeError) as exc:
            outcome.unchecked.append(f"Node: npm audit in {name} gave no report ({type(exc).__name__})")
            continue
        if "error" in data or "metadata" not in data:
            error = data.get("error")
            summary = data.get("message") or (error.get("summary") if isinstance(error, dict) else None)
            outcome.unchecked.append(
                f"Node: npm audit in {name} could not query the registry: {summary or 'no report'}"
            )
            continue
        outcome.checked += int(data["metadata"].get("dependencies", {}).get("total", 0))
        for package, vuln in sorted(data.get("vulnerabilities", {}).items()):
            fix = vuln.get("fixAvailable")
            fixed = f"fix: {fix['name']}@{fix['version']}" if isinstance(fix, dict) else f"fix available: {bool(fix)}"
            outcome.findings.append(f"{name}: {package} ({vuln.get('severity')}, {vuln.get('range')}; {fixed})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--unchecked",
        choices=("fail", "warn"),
        default="fail",
        help="when the audit cannot be done (service unreachable, no data for a version): fail (exit 2) or warn",
    )
    args = parser.parse_args(argv)
    started = time.monotonic()
    outcome = Outcome()
    audit_python(outcome)
    audit_node(outcome)
    took = f"{time.monotonic() - started:.1f} s"
    for finding in outcome.findings:
        print(f"audit: VULNERABLE {finding}")
    for gap in outcome.unchecked:
        print(f"audit: NOT CHECKED {gap}", file=sys.stderr)
    ignored = f", {len(outcome.ignored)} ignored (docs/security.md)" if outcome.ignored else ""
    if outcome.findings:
        print(
            f"audit: {len(outcome.findings)} known vulnerabilities{ignored} in {took}: move the pin to a fixed version"
            " (pyproject.toml or requirements/dev.in, then `make lock`), or add the ID with its reason to"
            " IGNORED in scripts/audit.py and to docs/security.md"
        )
        return 1
    if outcome.unchecked:
        verdict = "warning only (--unchecked warn)" if args.unchecked == "warn" else "failing (--unchecked fail)"
        print(
            f"audit: NOT DONE for everything ({outcome.checked} packages checked, no finding{ignored}) in {took};"
            f" {verdict}. The vulnerability services must be reachable: see docs/security.md",
            file=sys.stderr,
        )
        return 0 if args.unchecked == "warn" else 2
    print(f"audit: {outcome.checked} packages checked, no known vulnerability{ignored} in {took}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
