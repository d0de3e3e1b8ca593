"""Reading rules files: a path (one file or a folder of them) → a validated ``RuleSet``; ``lint`` and ``describe``
for ``toolshim check-rules``.

JSON5, ``${VAR}`` substituted from the environment (an unset one is an error), then validated strictly
against ``rules.RulesFile``; every error names the file and the field (with the closest known key for a
typo). Upstreams merge across files, model rules concatenate in file-name order.
"""

from __future__ import annotations

import difflib
import fnmatch
import importlib.util
import json
import os
import re
from pathlib import Path
from typing import Any

import json5
from pydantic import BaseModel, ValidationError

from ..formats import FORMATS
from ..observe.redact import Redactor
from .rules import (
    PROVIDER_PACKAGES,
    MissingExtra,
    ModelRule,
    RulesError,
    RuleSet,
    RulesFile,
    UpstreamConfig,
    masked_url,
    quoted,
)


def _grammar_formats() -> list[str]:
    """The registered formats that have a grammar, sorted: each format says so itself (``grammar``)."""
    return sorted(name for name, fmt in FORMATS.items() if fmt.grammar is not None)


def _rules_files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix in (".json5", ".json") and p.is_file())
        if not files:
            raise RulesError(f"{path}: no *.json5 or *.json rules files in this folder")
        return files
    if not path.exists():
        raise RulesError(f"{path}: no such file or folder")
    return [path]


def _format_validation(file: Path, exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"]).lstrip(".") or "(top)"
        hint = _extra_key_hint(err["loc"]) if err["type"] == "extra_forbidden" else ""
        lines.append(f"{file}: {where}: {err['msg']}{hint}")
    return "\n".join(lines)


def _extra_key_hint(loc: tuple[int | str, ...]) -> str:
    """For an unknown key: where the key belongs (``api_key``) or the closest known key."""
    key = str(loc[-1])
    if len(loc) == 1:
        model: type[BaseModel] = RulesFile
    elif loc[0] == "upstreams" and len(loc) == 3:
        model = UpstreamConfig
    elif loc[0] == "models" and len(loc) == 3:
        model = ModelRule
    else:
        return ""
    if key in ("api_key", "key", "token", "api_token"):
        return (
            "; keys are never written in rules files: put it in an environment variable and name that "
            'variable with api_key_env (e.g. api_key_env: "OPENAI_API_KEY")'
        )
    close = difflib.get_close_matches(key, list(model.model_fields), n=1, cutoff=0.6)
    return f" (did you mean `{close[0]}`?)" if close else ""


_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _substitute_env(value: Any, where: str, missing: list[str]) -> Any:
    """``${VAR}`` in string values (not keys) → the variable's value; unset names go to ``missing``."""
    if isinstance(value, str):

        def replace(match: re.Match[str]) -> str:
            found = os.environ.get(match.group(1))
            if found is None:
                missing.append(f"{where or '(top)'}: environment variable {match.group(1)} is not set")
                return ""
            return found

        return _ENV_REF.sub(replace, value)
    if isinstance(value, dict):
        return {k: _substitute_env(v, f"{where}.{k}".lstrip("."), missing) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute_env(v, f"{where}[{i}]", missing) for i, v in enumerate(value)]
    return value


def _read_file(file: Path) -> RulesFile:
    try:
        data: Any = json5.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise RulesError(f"{file}: cannot read: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise RulesError(f"{file}: not valid JSON5: {exc}") from exc
    missing: list[str] = []
    data = _substitute_env(data, "", missing)
    if missing:
        raise RulesError("\n".join(f"{file}: {line}" for line in missing))
    try:  # strict, from JSON: "yes" is no boolean and "3" no number; arrays fill tuples
        return RulesFile.model_validate_json(json.dumps(data), strict=True)
    except ValidationError as exc:
        raise RulesError(_format_validation(file, exc)) from exc


def load_rules(path: str | os.PathLike[str]) -> RuleSet:
    """Read and validate the rules at ``path``; ``RulesError`` names the file and field on failure."""
    files = _rules_files(Path(path))
    upstreams: dict[str, UpstreamConfig] = {}
    placed: list[tuple[Path, int, ModelRule]] = []
    owners: dict[str, Path] = {}
    for file in files:
        parsed = _read_file(file)
        for name, upstream in parsed.upstreams.items():
            if name in upstreams:
                raise RulesError(f"{file}: upstreams.{name}: already defined in {owners[name]}")
            upstreams[name], owners[name] = upstream, file
        placed.extend((file, i, rule) for i, rule in enumerate(parsed.models))
    for file, i, rule in placed:
        if rule.upstream not in upstreams:
            known = ", ".join(sorted(upstreams)) or "none defined"
            raise RulesError(f"{file}: models[{i}].upstream: unknown upstream {rule.upstream!r} (known: {known})")
        if rule.constrained is True and upstreams[rule.upstream].constraint_dialect == "none":
            raise RulesError(
                f"{file}: models[{i}].constrained: true needs upstreams.{rule.upstream}.constraint_dialect "
                '("gbnf" or "vllm"); "auto" uses one only where it is set'
            )
    checked = [rule for _, _, rule in placed]
    if not checked:
        raise RulesError(f"{path}: no model rules: add at least one entry under 'models'")
    _require_provider_packages(upstreams, owners)
    return RuleSet(upstreams, checked, files)


def _require_provider_packages(upstreams: dict[str, UpstreamConfig], owners: dict[str, Path]) -> None:
    """Refuse, at load, a provider whose package is missing: ``serve`` checks before it starts any worker,
    ``check-rules`` and reloads report it, and no worker dies on the import (once per worker, restarted)."""
    for provider, (module, extra) in PROVIDER_PACKAGES.items():
        users = [name for name, config in upstreams.items() if config.provider == provider]
        if users and importlib.util.find_spec(module) is None:
            files = ", ".join(sorted({str(owners[name]) for name in users}))
            names = ", ".join(f"upstreams.{name}" for name in users)
            raise MissingExtra(
                f"{files}: {names}: provider {provider!r} needs the {module} package, which is not installed: "
                f"pip install 'toolshim[{extra}]' (or remove the upstream from the rules)"
            )


def lint(rules: RuleSet) -> list[str]:
    """Valid but probably wrong: rules no request can reach, and key variables that are unset."""
    found: list[str] = []
    for i, rule in enumerate(rules.models):
        for j, earlier in enumerate(rules.models[:i]):
            if earlier.match == rule.match:
                found.append(f"models[{i}] ({rule.match!r}) duplicates models[{j}]: it is never used")
                break
            if fnmatch.fnmatchcase(rule.match, earlier.match):
                found.append(
                    f"models[{i}] ({rule.match!r}) is shadowed by models[{j}] ({earlier.match!r}), which "
                    "matches every name it does and comes first: it is never used"
                )
                break
    for i, rule in enumerate(rules.models):
        emulates = rule.fallback_format if rule.tool_mode == "auto" else rule.tool_mode
        if rule.constrained is not False and emulates in FORMATS and FORMATS[emulates].grammar is None:
            found.append(
                f"models[{i}].constrained: format {emulates!r} has no grammar (only "
                f"{quoted(_grammar_formats())}): its calls go unconstrained"
            )
    for name, upstream in rules.upstreams.items():
        if upstream.api_key_env and not os.environ.get(upstream.api_key_env):
            found.append(
                f"upstreams.{name}.api_key_env: {upstream.api_key_env} is not set in this environment; "
                "requests would go without a key"
            )
    return found


def describe(rules: RuleSet) -> str:
    """The resolved model table that ``toolshim check-rules`` prints: no credential of a ``base_url``
    (``masked_url``) and no configured secret (keys, header values) in it, wherever it appears."""
    rows: list[tuple[str, ...]] = [("match", "tool mode", "upstream", "provider", "upstream model")]
    for rule in rules.models:
        up = rules.upstreams[rule.upstream]
        where = masked_url(up.base_url) if up.base_url else up.provider
        rows.append(
            (
                rule.match,
                rule.tool_mode,
                f"{rule.upstream} ({where})",
                up.provider,
                rule.upstream_model or "(as requested)",
            )
        )
    secrets = Redactor()  # a key or header value put elsewhere too (``${VAR}`` in a URL's path, a model name)
    secrets.update(secret for upstream in rules.upstreams.values() for secret in upstream.secrets())
    rows = [tuple(secrets.redact(cell) for cell in row) for row in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows)
