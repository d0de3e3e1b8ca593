"""The parts of BFCL (``bfcl-eval`` from PyPI) that ``bench/bfcl.py`` uses: data, tool conversion, checker.

``bfcl-eval`` declares a heavy dependency list (vllm-adjacent SDKs, tree-sitter, pandas, ...), so
``make bench-bfcl`` installs it with ``--no-deps`` and this module imports only:

* ``bfcl_eval.utils``: ``load_dataset_entry`` (questions, with BFCL's language hint added to every
  function description), ``load_ground_truth_entry``, ``is_function_calling_format_output``,
  ``is_empty_output``;
* ``bfcl_eval.model_handler.utils``: ``convert_to_tool`` (function docs -> OpenAI tools: dots in
  names become ``_``, BFCL types become JSON Schema types), ``system_prompt_pre_processing_chat_model``
  (BFCL's prompt-mode system prompt), ``default_decode_ast_prompting`` (``[func(a=1)]`` -> calls);
* ``bfcl_eval.eval_checker.ast_eval.ast_checker.ast_checker``.

Stubbed imports (none changes a score):

* ``bfcl_eval.constants.model_config`` imports every model handler (and their SDKs); the checker
  reads one field from it, ``MODEL_CONFIG_MAPPING[model].underscore_to_dot``. The stub holds two
  entries with BFCL's own values: the function-calling model (``True``: tools were sent with ``.``
  renamed to ``_``, as for BFCL's OpenAI FC handlers) and the prompt-mode model (``False``).
* ``bfcl_eval.model_handler.parser.java_parser`` / ``js_parser`` import tree-sitter; they decode
  only Java and JavaScript answers, categories this benchmark does not run. The stubs raise.

Two small functions mirror BFCL code that sits in modules too heavy to import:
``decode`` is ``OpenAICompletionsHandler.decode_ast`` (FC: ``[{name: json_args}]`` -> ``json.loads``;
prompt: ``default_decode_ast_prompting``), and ``score`` is ``eval_runner._evaluate_single_ast_entry``
and ``_evaluate_single_relevance_entry`` (irrelevance: correct when nothing decodes to a call; relevance:
correct when something does, its arguments unchecked).

BFCL writes result/score/lock folders under ``BFCL_PROJECT_ROOT`` at import; it is pointed at a
temporary folder removed when the process exits.
"""

from __future__ import annotations

import atexit
import copy
import json
import os
import random
import shutil
import sys
import tempfile
import types
from dataclasses import dataclass
from typing import Any

CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance")
# BFCL's user-contributed ("live") questions of the same kinds: a held-out check, scored by the same checker.
LIVE_CATEGORIES = (
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
    "live_irrelevance",
    "live_relevance",
)
KNOWN_CATEGORIES = CATEGORIES + LIVE_CATEGORIES


def is_irrelevance(category: str) -> bool:
    """Whether the category's questions fit none of their functions (correct: no call)."""
    return category.endswith("irrelevance")


def is_relevance_kind(category: str) -> bool:
    """Whether BFCL scores the category by whether a call was made at all (irrelevance: none; relevance: any)."""
    return category.endswith("relevance")


FC_MODEL = "toolshim-bfcl-fc"  # names in the stubbed MODEL_CONFIG_MAPPING (no "_": BFCL maps it to "/")
PROMPT_MODEL = "toolshim-bfcl-prompt"
INSTALL_HINT = "bfcl-eval is not installed: run `make bench-bfcl` (or `.venv/bin/pip install --no-deps bfcl-eval`)"


@dataclass(frozen=True, slots=True)
class Question:
    """One BFCL single-turn entry with its ground truth (``None`` for irrelevance)."""

    category: str
    id: str
    messages: list[dict[str, Any]]
    functions: list[dict[str, Any]]
    answer: list[dict[str, Any]] | None


@dataclass(frozen=True, slots=True)
class Verdict:
    """BFCL's judgement of one answer."""

    valid: bool
    error_type: str
    error: str
    decoded: Any


def _stub(name: str, **attrs: Any) -> None:
    """Register a minimal module under ``name`` (see the module docstring for which and why)."""
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    sys.modules[name] = module


def _no_tree_sitter(*_args: Any, **_kwargs: Any) -> Any:
    raise NotImplementedError("Java/JavaScript answers are not decoded by bench/bfcl.py (tree-sitter stubbed)")


def _install_stubs() -> None:
    """Stub the three heavy imports before anything from bfcl_eval is imported."""
    if "bfcl_eval.constants.model_config" in sys.modules:
        return
    mapping = {
        FC_MODEL: types.SimpleNamespace(underscore_to_dot=True, is_fc_model=True),
        PROMPT_MODEL: types.SimpleNamespace(underscore_to_dot=False, is_fc_model=False),
    }
    _stub("bfcl_eval.constants.model_config", MODEL_CONFIG_MAPPING=mapping)
    _stub("bfcl_eval.model_handler.parser.java_parser", parse_java_function_call=_no_tree_sitter)
    _stub("bfcl_eval.model_handler.parser.js_parser", parse_javascript_function_call=_no_tree_sitter)
    root = tempfile.mkdtemp(prefix="toolshim-bfcl-")
    atexit.register(shutil.rmtree, root, True)
    os.environ.setdefault("BFCL_PROJECT_ROOT", root)


class Bfcl:
    """BFCL's data and checker, imported once (raises ``SystemExit`` with the install hint if absent)."""

    def __init__(self) -> None:
        _install_stubs()
        try:
            from bfcl_eval import utils as bfcl_utils
            from bfcl_eval.constants.enums import Language, ModelStyle, ReturnFormat
            from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI
            from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker
            from bfcl_eval.model_handler import utils as handler_utils
        except ModuleNotFoundError as exc:
            raise SystemExit(f"{INSTALL_HINT} ({exc})") from exc
        self._utils = bfcl_utils
        self._handler_utils = handler_utils
        self._ast_checker = ast_checker
        self._python = Language.PYTHON
        self._return_python = ReturnFormat.PYTHON
        self._openai_style = ModelStyle.OPENAI_COMPLETIONS
        self._type_mapping = GORILLA_TO_OPENAPI

    def questions(self, category: str, sample: int, seed: int) -> list[Question]:
        """``sample`` seeded questions of one category (all when ``sample`` is 0), in BFCL's order.

        The pick is a prefix of one seeded shuffle, so a larger sample holds every question of a smaller one."""
        entries = self._utils.load_dataset_entry(category)
        answers = {} if is_relevance_kind(category) else self._ground_truth(category)
        if 0 < sample < len(entries):
            order = list(range(len(entries)))
            random.Random(f"{seed}:{category}").shuffle(order)
            picked = set(order[:sample])
            entries = [e for i, e in enumerate(entries) if i in picked]
        return [Question(category, e["id"], e["question"][0], e["function"], answers.get(e["id"])) for e in entries]

    def _ground_truth(self, category: str) -> dict[str, list[dict[str, Any]]]:
        return {e["id"]: e["ground_truth"] for e in self._utils.load_ground_truth_entry(category)}

    def tools(self, question: Question) -> list[dict[str, Any]]:
        """BFCL's own conversion to OpenAI ``tools``, as its OpenAI function-calling handler sends them."""
        converted: list[dict[str, Any]] = self._handler_utils.convert_to_tool(
            question.functions, self._type_mapping, self._openai_style
        )
        return converted

    def prompt_messages(self, question: Question) -> list[dict[str, Any]]:
        """The messages with BFCL's prompt-mode system prompt (the functions as JSON, answer as ``[f(a=1)]``)."""
        messages: list[dict[str, Any]] = self._handler_utils.system_prompt_pre_processing_chat_model(
            copy.deepcopy(question.messages), copy.deepcopy(question.functions), question.id
        )
        return messages

    def decode(self, result: Any, prompting: bool) -> Any:
        """``OpenAICompletionsHandler.decode_ast``: FC results are ``[{name: json_args}]``; raises if undecodable."""
        if prompting:
            return self._handler_utils.default_decode_ast_prompting(result, self._return_python, False)
        decoded = []
        for invoked_function in result:
            name = next(iter(invoked_function.keys()))
            decoded.append({name: json.loads(invoked_function[name])})
        return decoded

    def score(self, question: Question, result: Any, prompting: bool) -> Verdict:
        """BFCL's verdict for one answer, as ``eval_runner`` computes it for the question's category."""
        if is_relevance_kind(question.category):
            return self._score_relevance(result, prompting, wants_call=not is_irrelevance(question.category))
        try:
            decoded = self.decode(result, prompting)
        except Exception as exc:  # BFCL counts any decoder failure as a wrong answer, so do we
            return Verdict(False, "ast_decoder:decoder_failed", f"Invalid syntax. Failed to decode AST. {exc}", None)
        if not self._utils.is_function_calling_format_output(decoded):
            return Verdict(False, "ast_decoder:decoder_wrong_output_format", "Did not output in the format", decoded)
        checked = self._ast_checker(
            question.functions,
            decoded,
            question.answer,
            self._python,
            question.category,
            PROMPT_MODEL if prompting else FC_MODEL,
        )
        if checked["valid"]:
            return Verdict(True, "", "", decoded)
        return Verdict(False, checked["error_type"], "; ".join(map(str, checked["error"])), decoded)

    def _score_relevance(self, result: Any, prompting: bool, wants_call: bool) -> Verdict:
        """``_evaluate_single_relevance_entry``: a call is one that decodes and is not empty; irrelevance wants
        none, relevance (a question some function fits, arguments not checked) wants one."""
        try:
            decoded = self.decode(result, prompting)
        except Exception:  # undecodable = no function call
            decoded = None
        called = decoded is not None and not self._utils.is_empty_output(decoded)
        if called == wants_call:
            return Verdict(True, "", "", decoded)
        if wants_call:
            return Verdict(False, "relevance_error:decoder_failed", "no function call where one applies", decoded)
        return Verdict(False, "irrelevance_error:decoder_success", "called a function when none applies", decoded)
