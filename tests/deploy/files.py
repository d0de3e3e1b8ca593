"""Paths and loaders for the files under deploy/, shared by the deploy tests.

Loaders are cached: every test reads the same parsed objects and must not mutate them (copy with ``{**d}``).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from tests.deploy.parsing import parse_dockerfile

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
DOCKERFILE = DEPLOY / "Dockerfile"
IGNORE_FILE = DEPLOY / "Dockerfile.dockerignore"  # BuildKit: <Dockerfile>.dockerignore beats <context>/.dockerignore
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "toolshim.json"
SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: same results, faster


def yaml_file(path: Path) -> Any:
    return yaml.load(path.read_text(encoding="utf-8"), Loader=SafeLoader)


@cache
def k8s_documents() -> list[tuple[str, dict[str, Any]]]:
    """(``file#index``, object) for every YAML document under deploy/k8s, overlays included."""
    found = []
    for path in sorted(K8S.rglob("*.yaml")):
        docs = [d for d in yaml.load_all(path.read_text(encoding="utf-8"), Loader=SafeLoader) if d]
        found.extend((f"{path.relative_to(K8S)}#{i}", doc) for i, doc in enumerate(docs))
    return found


def k8s_object(kind: str) -> dict[str, Any]:
    matches = [doc for _, doc in k8s_documents() if doc.get("kind") == kind]
    assert len(matches) == 1, f"expected one {kind} under deploy/k8s, found {len(matches)}"
    return matches[0]


def container() -> dict[str, Any]:
    containers = k8s_object("Deployment")["spec"]["template"]["spec"]["containers"]
    return next(c for c in containers if c["name"] == "toolshim")


@cache
def dockerfile_env() -> dict[str, str]:
    """The runtime stage's ENV (``ENV a=b c=d`` form)."""
    parsed = parse_dockerfile(DOCKERFILE.read_text(encoding="utf-8"))
    runtime = parsed.stages[-1]
    env: dict[str, str] = {}
    for ins in parsed.of("ENV"):
        if ins.stage == runtime:
            env.update(word.split("=", 1) for word in shlex.split(ins.args))  # type: ignore[misc]
    return env


@cache
def compose() -> dict[str, Any]:
    return yaml_file(DEPLOY / "compose.yaml")


def compose_mounts(service: dict[str, Any]) -> dict[str, str]:
    """Container path -> host source, for a service's volumes (short and long syntax)."""
    mounts: dict[str, str] = {}
    for volume in service.get("volumes", []):
        if isinstance(volume, str):
            source, target = volume.split(":")[:2]
        else:
            source, target = volume.get("source", ""), volume["target"]
        mounts[target] = source
    return mounts


def seconds(duration: str | int) -> float:
    """A compose / Go duration ("1m30s", "40s") or a bare number of seconds."""
    if isinstance(duration, int | float):
        return float(duration)
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", duration)
    assert parts and "".join(n + u for n, u in parts) == duration, f"not a duration: {duration}"
    scale = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    return sum(float(n) * scale[u] for n, u in parts)


@cache
def dashboard() -> dict[str, Any]:
    """Strict JSON (Grafana's importer is): json, not json5."""
    return json.loads(DASHBOARD.read_text(encoding="utf-8"))


def panels(board: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in board["panels"]:
        yield panel
        yield from panel.get("panels", [])  # collapsed rows keep their panels inside
