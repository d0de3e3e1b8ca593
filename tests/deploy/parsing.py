"""Small readers for the deploy files that have no parser on this machine: Dockerfiles, Docker ignore files
and the PromQL in Grafana dashboards.

Docker is not installed here, so ``tests/deploy/test_manifests.py`` checks the image build statically with
these. They cover the subset of each syntax that deploy/ uses (and say so when they meet something else);
they are not general implementations.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

# ---------------------------------------------------------------- Dockerfile


@dataclass(frozen=True, slots=True)
class Instruction:
    """One Dockerfile instruction after line continuations are joined; ``stage`` is the FROM it belongs to."""

    keyword: str
    args: str
    stage: str | None


@dataclass(frozen=True, slots=True)
class Copy:
    """A COPY or ADD: ``from_stage`` is set for ``--from=`` copies, which do not read the build context."""

    sources: tuple[str, ...]
    dest: str
    from_stage: str | None
    stage: str | None


@dataclass(slots=True)
class Dockerfile:
    """The parsed file: instructions, stage names in order, and ARG defaults (global, then per stage)."""

    instructions: list[Instruction] = field(default_factory=list)
    stages: list[str] = field(default_factory=list)
    global_args: dict[str, str] = field(default_factory=dict)
    stage_args: dict[str, dict[str, str]] = field(default_factory=dict)

    def of(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]

    def expand(self, text: str, stage: str | None) -> str:
        """Substitute ``$VAR`` / ``${VAR}`` with ARG defaults visible in ``stage``."""
        scope = {**self.global_args, **self.stage_args.get(stage or "", {})}

        def sub(match: re.Match[str]) -> str:
            name = match.group(1) or match.group(2)
            if name not in scope:
                raise ValueError(f"${name} has no ARG default in stage {stage!r}")
            return scope[name]

        return re.sub(r"\$\{(\w+)\}|\$(\w+)", sub, text)


def _logical_lines(text: str) -> list[str]:
    """Join backslash continuations; drop comment lines (also inside continuations) and blank lines."""
    lines: list[str] = []
    pending = ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if stripped.startswith("#") or (not stripped and not pending):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        lines.append((pending + stripped).strip())
        pending = ""
    if pending:
        lines.append(pending.strip())
    return [line for line in lines if line]


def parse_dockerfile(text: str) -> Dockerfile:
    """Instructions with their stage, stage names (``AS name`` or the index) and ARG defaults."""
    parsed = Dockerfile()
    stage: str | None = None
    for line in _logical_lines(text):
        keyword, _, args = line.partition(" ")
        keyword, args = keyword.upper(), args.strip()
        if keyword == "FROM":
            words = args.split()
            stage = words[2] if len(words) >= 3 and words[1].upper() == "AS" else str(len(parsed.stages))
            parsed.stages.append(stage)
            parsed.stage_args[stage] = {}
        elif keyword == "ARG":
            name, _, default = args.partition("=")
            target = parsed.stage_args[stage] if stage is not None else parsed.global_args
            # A stage-level ARG without a default re-declares the global one.
            target[name] = default.strip("\"'") if default else parsed.global_args.get(name, "")
        parsed.instructions.append(Instruction(keyword, args, stage))
    return parsed


def exec_form(args: str) -> list[str] | None:
    """The JSON array of an exec-form instruction (``["a", "b"]``), or ``None`` for shell form."""
    if not args.startswith("["):
        return None
    value = json.loads(args)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"exec form must be a JSON array of strings: {args}")
    return value


def copies(dockerfile: Dockerfile) -> list[Copy]:
    """Every COPY/ADD with ARG defaults expanded."""
    found: list[Copy] = []
    for ins in dockerfile.instructions:
        if ins.keyword not in ("COPY", "ADD"):
            continue
        words = exec_form(ins.args) or shlex.split(ins.args)
        flags = [w for w in words if w.startswith("--")]
        paths = [dockerfile.expand(w, ins.stage) for w in words if not w.startswith("--")]
        from_stage = next((f.split("=", 1)[1] for f in flags if f.startswith("--from=")), None)
        found.append(Copy(tuple(paths[:-1]), paths[-1], from_stage, ins.stage))
    return found


def run_mounts(dockerfile: Dockerfile) -> list[dict[str, str]]:
    """The ``--mount=`` options of RUN instructions, as key/value dicts (``from``, ``source``, ...)."""
    mounts: list[dict[str, str]] = []
    for ins in dockerfile.of("RUN"):
        for match in re.finditer(r"--mount=(\S+)", ins.args):
            mounts.append(dict(part.split("=", 1) for part in match.group(1).split(",") if "=" in part))
    return mounts


# ---------------------------------------------------------------- .dockerignore


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    """Docker's ignore-pattern syntax (Go filepath.Match plus ``**``) as an anchored regex."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        elif pattern[i] == "[":
            end = pattern.index("]", i)
            out, i = out + "[" + pattern[i + 1 : end].replace("!", "^", 1) + "]", end + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out + r"\Z")


@dataclass(frozen=True, slots=True)
class IgnoreRules:
    """Patterns in file order; ``True`` in the pair marks a ``!`` exception. The last match wins."""

    patterns: tuple[tuple[re.Pattern[str], bool], ...]

    @classmethod
    def parse(cls, text: str) -> IgnoreRules:
        patterns: list[tuple[re.Pattern[str], bool]] = []
        for raw in text.splitlines():
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            negated = line.startswith("!")
            cleaned = line.lstrip("!").strip().strip("/")
            cleaned = re.sub(r"/+", "/", cleaned).removeprefix("./")
            patterns.append((_pattern_regex(cleaned), negated))
        return cls(tuple(patterns))

    def excluded(self, path: str) -> bool:
        """Whether ``path`` (relative to the context, ``/``-separated) stays out of the build context.

        As in moby's patternmatcher, a pattern also matches a path when it matches one of its parent folders.
        """
        parts = path.strip("/").split("/")
        candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
        result = False
        for regex, negated in self.patterns:
            if any(regex.match(candidate) for candidate in candidates):
                result = not negated
        return result


def context_files(root: Path, source: str, rules: IgnoreRules) -> list[str]:
    """The files a COPY source sends from the context: the file itself or a folder's files, minus ignored ones."""
    matched = sorted(root.glob(source)) if any(ch in source for ch in "*?[") else [root / source]
    files: list[Path] = []
    for target in matched:
        files.extend([target] if target.is_file() else sorted(p for p in target.rglob("*") if p.is_file()))
    relative = [p.relative_to(root).as_posix() for p in files]
    return [r for r in relative if not rules.excluded(r)]


# ---------------------------------------------------------------- PromQL

PROMQL_KEYWORDS = frozenset({"and", "or", "unless", "bool", "offset", "group_left", "group_right", "inf", "nan"})
_STRING = r'"(?:[^"\\]|\\.)*"'
_MATCHER = re.compile(r"([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)\s*" + _STRING)
_SELECTOR = re.compile(r"\{[^{}]*\}")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^()]*)\)")
_IDENT = re.compile(r"[a-zA-Z_:][\w:]*")


def promql_names(expr: str) -> tuple[set[str], set[str]]:
    """The metric names and label names a PromQL expression uses.

    Label names come from selectors' matchers and from grouping clauses; metric names are the identifiers
    left once selectors, groupings, ranges, numbers and function calls are taken out.
    """
    labels: set[str] = set()
    for selector in _SELECTOR.findall(expr):
        labels.update(_MATCHER.findall(selector))
    for group in _GROUPING.findall(expr):
        labels.update(name.strip() for name in group.split(",") if name.strip())
    rest = _SELECTOR.sub(" ", expr)
    rest = _GROUPING.sub(" ", rest)
    rest = re.sub(r"\[[^\]]*\]", " ", rest)
    rest = re.sub(_STRING, " ", rest)
    rest = re.sub(r"\b\d+(?:\.\d+)?(?:e[+-]?\d+)?\b", " ", rest)
    metrics: set[str] = set()
    for match in _IDENT.finditer(rest):
        name = match.group(0)
        is_call = rest[match.end() :].lstrip().startswith("(")
        if not is_call and name.lower() not in PROMQL_KEYWORDS:
            metrics.add(name)
    return metrics, labels


def label_values_names(query: str) -> tuple[set[str], set[str]]:
    """Metric and label names of a Grafana ``label_values(metric{...}, label)`` variable query."""
    match = re.fullmatch(r"\s*label_values\(\s*(?:(.+?)\s*,\s*)?([a-zA-Z_]\w*)\s*\)\s*", query)
    if match is None:
        raise ValueError(f"not a label_values() query: {query}")
    selector, label = match.groups()
    metrics, labels = promql_names(selector) if selector else (set(), set())
    return metrics, labels | {label}
