"""The ``toolshim`` command: ``serve`` and ``check-rules``.

Operator mistakes (bad settings, bad rules, a port in use) end with one line on stderr that
names the flag or ``TOOLSHIM_*`` variable to fix, and exit code 2; never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from . import __version__
from .config.loading import describe, lint, load_rules
from .config.rules import MissingExtra, RulesError
from .config.settings import DEFAULT_RULES, ENV_VARS, SettingsError, load_settings
from .server import listener


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="toolshim", description="OpenAI-compatible proxy that emulates tool calls.")
    parser.add_argument("--version", action="version", version=f"toolshim {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the proxy")
    serve.add_argument(
        "--rules", help="rules file or folder (env TOOLSHIM_RULES; default: the rules shipped with toolshim)"
    )
    serve.add_argument("--host", help="bind address (env TOOLSHIM_HOST, default 127.0.0.1)")
    serve.add_argument("--port", help="port (env TOOLSHIM_PORT, default 8000)")
    serve.add_argument(
        "--workers", help="worker processes on one port (env TOOLSHIM_WORKERS, default: the CPUs this process may use)"
    )
    serve.add_argument("--log-level", help="DEBUG, INFO, WARNING (env TOOLSHIM_LOG_LEVEL)")
    serve.add_argument(
        "--cors-origins",
        help="comma-separated browser origins allowed to call /v1 (CORS; env TOOLSHIM_CORS_ORIGINS, "
        "default none; '*' for any)",
    )
    serve.add_argument(
        "--allow-unauthenticated",
        action="store_true",
        default=None,
        help="serve a non-loopback address without client keys, on purpose (env TOOLSHIM_ALLOW_UNAUTHENTICATED)",
    )
    check = sub.add_parser("check-rules", help="validate rules and print the model table")
    check.add_argument(
        "path", nargs="?", help="rules file or folder (default: TOOLSHIM_RULES, else the rules shipped with toolshim)"
    )
    return parser


def _check_rules(given: str | None) -> int:
    """Check the rules ``serve`` would load: the path given, else ``TOOLSHIM_RULES``, else the packaged ones."""
    path = given or os.environ.get(ENV_VARS["rules_path"]) or DEFAULT_RULES
    try:
        rules = load_rules(path)
    except MissingExtra as exc:
        print(f"unusable rules: {exc}", file=sys.stderr)
        return 2
    except RulesError as exc:
        print(f"invalid rules:\n{exc}", file=sys.stderr)
        return 2
    print(describe(rules))
    for warning in lint(rules):
        print(f"warning: {warning}", file=sys.stderr)
    print(
        f"\n{len(rules.models)} model rules, {len(rules.upstreams)} upstreams: OK "
        f"({', '.join(str(p) for p in rules.sources)})"
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "check-rules":
        return _check_rules(args.path)
    try:
        settings = load_settings(
            {
                "rules_path": args.rules,
                "host": args.host,
                "port": args.port,
                "workers": args.workers,
                "log_level": args.log_level,
                "allow_unauthenticated": args.allow_unauthenticated,
                "allowed_origins": args.cors_origins,
            }
        )
    except SettingsError as exc:
        print(f"toolshim: invalid settings:\n{exc}", file=sys.stderr)
        return 2
    problem = settings.exposure_problem()
    if problem is not None:
        print(f"toolshim: {problem}", file=sys.stderr)
        return 2
    try:  # checked here, before any worker starts: a bad file or a missing extra is one message, exit 2
        load_rules(settings.rules_path)
    except MissingExtra as exc:
        print(f"toolshim: {exc}", file=sys.stderr)
        return 2
    except RulesError as exc:
        print(f"toolshim: invalid rules (set the path with --rules or TOOLSHIM_RULES):\n{exc}", file=sys.stderr)
        return 2
    try:  # bound here, once, for every worker: a port already served fails now, with one line
        sockets = listener.bind(settings.host, settings.port)
    except OSError as exc:
        print(f"toolshim: {listener.describe(exc, settings.host, settings.port)}", file=sys.stderr)
        return 2
    from .server.workers import serve

    return serve(settings, sockets)
