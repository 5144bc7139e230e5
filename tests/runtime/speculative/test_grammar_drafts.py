"""Grammar drafts: the forced text's tokens, and chains cut at the first refused token with
the request's matcher never changed."""

from __future__ import annotations

import json

from radixlm.fsm import GrammarCompiler, GrammarSpec, TokenVocabulary
from radixlm.runtime.speculative.grammar_drafts import forced_tokens, grammar_prefix

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"],
          "additionalProperties": False}


def _matcher(tokenizer):  # noqa: ANN001, ANN202
    vocab = TokenVocabulary.from_tokenizer(tokenizer, len(tokenizer), [tokenizer.eos_token_id])
    grammar = GrammarCompiler(vocab).compile(GrammarSpec.json_schema(json.dumps(SCHEMA)))
    return grammar.new_matcher()


def encode(tokenizer):  # noqa: ANN001, ANN201
    return lambda text: tokenizer.encode(text, add_special_tokens=False)


def test_forced_text_becomes_tokens_the_grammar_accepts(tokenizer):
    m = _matcher(tokenizer)
    forced = forced_tokens(m, encode(tokenizer), 16)
    assert forced and '{"name"'.startswith(tokenizer.decode(forced))
    assert grammar_prefix(m, forced) == len(forced)
    assert m.num_tokens == 0, "the request's matcher is never advanced"
    assert forced_tokens(m, encode(tokenizer), 2) == forced[:2]
    assert forced_tokens(m, encode(tokenizer), 0) == []


def test_a_chain_is_cut_at_the_first_refused_token(tokenizer):
    m = _matcher(tokenizer)
    good = encode(tokenizer)('{"name"')  # only ':' (or a space) may follow
    bad = encode(tokenizer)("}")
    assert grammar_prefix(m, good + bad + good) == len(good)
    assert grammar_prefix(m, bad) == 0
    assert m.num_tokens == 0


def test_a_chain_ends_where_only_the_end_can_follow(tokenizer):
    m = _matcher(tokenizer)
    done = encode(tokenizer)('{"name": "Al"}')
    assert m.accept_tokens(done[:-1])
    extra = done[-1:] + encode(tokenizer)(" x")
    assert grammar_prefix(m, extra) == 1, "nothing after the closing brace is kept"
