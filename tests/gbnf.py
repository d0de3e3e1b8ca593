"""llama.cpp's own GBNF parser and grammar sampler, for tests: does a grammar parse, does it accept a text?

Loads only the vocabulary of the local test model (``make model``; skips without it), builds the
grammar sampler with ``llama_sampler_init_grammar`` (NULL when llama.cpp cannot parse the grammar),
then walks the text token by token: each token is offered alone to the sampler, and a token the
grammar forbids comes back with logit -inf. A text is accepted when every token passes.
"""

from __future__ import annotations

import ctypes
import functools
import math
from typing import Any

import pytest


@functools.cache
def _vocab() -> tuple[Any, Any]:
    llama_cpp = pytest.importorskip("llama_cpp")
    from scripts.local_model import LocalModelError
    from scripts.local_stack import model_path

    try:
        path = model_path("qwen")
    except LocalModelError:
        pytest.skip("the local test model is missing (make model)")
    if not path.is_file():
        pytest.skip("the local test model is missing (make model)")
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    model = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
    assert model, f"cannot load the vocabulary of {path}"
    return llama_cpp, llama_cpp.llama_model_get_vocab(model)


def _sampler(grammar: str) -> Any:
    llama_cpp, vocab = _vocab()
    return llama_cpp.llama_sampler_init_grammar(vocab, grammar.encode(), b"root")


def parses(grammar: str) -> bool:
    """llama.cpp's parser accepts the grammar."""
    llama_cpp, _ = _vocab()
    sampler = _sampler(grammar)
    if not sampler:
        return False
    llama_cpp.llama_sampler_free(sampler)
    return True


def accepts(grammar: str, text: str) -> bool:
    """The grammar allows ``text`` as (the start of) the output, token by token."""
    llama_cpp, vocab = _vocab()
    sampler = _sampler(grammar)
    assert sampler, "the grammar does not parse"
    raw = text.encode()
    tokens = (llama_cpp.llama_token * (len(raw) + 8))()
    count = llama_cpp.llama_tokenize(vocab, raw, len(raw), tokens, len(tokens), False, False)
    assert count >= 0
    try:
        for token in tokens[:count]:
            data = (llama_cpp.llama_token_data * 1)(llama_cpp.llama_token_data(token, 0.0, 0.0))
            array = llama_cpp.llama_token_data_array(data, 1, -1, False)
            llama_cpp.llama_sampler_apply(sampler, ctypes.byref(array))
            if math.isinf(data[0].logit):
                return False
            llama_cpp.llama_sampler_accept(sampler, token)
        return True
    finally:
        llama_cpp.llama_sampler_free(sampler)
