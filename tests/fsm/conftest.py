"""Fixtures for the fsm tests: the tiny tokenizer's vocabulary, a compiler, the corpus."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from radixlm.fsm import CompileBudget, GrammarCompiler, TokenVocabulary
from radixlm.testing.real_vocabularies import RealVocabulary, VocabularyUnavailable, load_vocabulary

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "jsonschemabench"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--jsonschemabench", default=None,
                     help="folder of the JSONSchemaBench sample (default: ../shared/"
                          "jsonschemabench beside the checkout)")


# Tests compile many grammars: background warm-up would only compete with them for the CPU.
QUIET = CompileBudget(background_warmup_states=0)


@pytest.fixture(scope="session")
def load_real() -> Callable[[str], RealVocabulary]:
    """``load(name)``: :func:`load_vocabulary` once per name for the whole session (each
    module using :func:`real` would load it again: Gemma 3's 262k takes seconds); skips,
    naming the package to install, where it is absent."""
    loaded: dict[str, RealVocabulary | VocabularyUnavailable] = {}

    def load(name: str) -> RealVocabulary:
        if name not in loaded:
            try:
                loaded[name] = load_vocabulary(name)
            except VocabularyUnavailable as exc:
                loaded[name] = exc
        found = loaded[name]
        if isinstance(found, VocabularyUnavailable):
            pytest.skip(str(found))
        return found

    return load


@pytest.fixture(scope="module", params=["sentencepiece", "smollm2", "tekken", "gemma3"])
def real(request: pytest.FixtureRequest, load_real: Callable[[str], RealVocabulary]
         ) -> RealVocabulary:
    """Each real vocabulary (skipped, naming the package to install, where it is absent)."""
    return load_real(request.param)


@pytest.fixture(scope="session")
def compiler(vocab: TokenVocabulary) -> GrammarCompiler:
    """A shared compiler (memory cache only, no background warm-up)."""
    return GrammarCompiler(vocab, QUIET)


@pytest.fixture(scope="session")
def corpus_dir(request: pytest.FixtureRequest) -> Path:
    """The JSONSchemaBench sample; tests using it skip when it is absent."""
    option = request.config.getoption("--jsonschemabench", default=None)
    path = Path(option) if option else DEFAULT_CORPUS
    if not path.is_dir():
        pytest.skip(f"JSONSchemaBench corpus not found at {path.resolve()} (pass "
                    f"--jsonschemabench=DIR)")
    return path.resolve()


@pytest.fixture(scope="session")
def check_schema():  # noqa: ANN201
    """``check(schema, valid_texts, invalid_texts, **options)``: the compiled grammar accepts
    exactly the valid texts (both in our automaton and with Python ``re`` on the printed
    regex), and ``jsonschema`` (draft of the schema, format checker on) agrees with the
    split, so a test's data cannot silently be wrong. Returns the printed regex."""
    import json
    import re

    import jsonschema

    from radixlm.fsm.automaton.derivatives import TermBuilder
    from radixlm.fsm.grammars.json import JsonSchemaOptions, json_schema_to_node
    from radixlm.fsm.regex import tree as ra

    def check(schema, valid, invalid, judge: bool = True, **options) -> str:  # noqa: ANN001
        options.setdefault("any_value_depth", 2)
        node, _ = json_schema_to_node(schema, JsonSchemaOptions(**options))
        builder = TermBuilder()
        term, rendered = builder.lower(node), ra.render(node)
        cls = jsonschema.validators.validator_for(schema if isinstance(schema, dict) else {},
                                                  default=jsonschema.Draft202012Validator)
        validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
        for text, want in [(t, True) for t in valid] + [(t, False) for t in invalid]:
            if judge:
                try:
                    truth = validator.is_valid(json.loads(text))
                except json.JSONDecodeError:
                    truth = False
                assert truth == want, f"test data wrong: jsonschema says {truth} for {text}"
            assert builder.matches(term, text.encode()) == want, (schema, text)
            assert bool(re.fullmatch(rendered, text)) == want, (schema, text, rendered[:300])
        return rendered

    return check


@pytest.fixture(scope="session")
def judged_automaton():  # noqa: ANN201
    """``agrees(schema, value)``: whether the schema's automaton accepts some spelling of
    ``value`` exactly when ``jsonschema`` calls it valid (True too when the spelling search
    ran out of budget: undecided, not judged). Automata are built once per schema; the
    printed regex is not checked (see ``check_schema`` for that)."""
    import json

    import jsonschema

    from radixlm.fsm.automaton.derivatives import TermBuilder
    from radixlm.fsm.automaton.lazy_dfa import LazyDFA
    from radixlm.fsm.grammars.json import JsonSchemaOptions, json_schema_to_node
    from radixlm.fsm.grammars.json.witness import find_accepted_text

    built: dict[str, tuple] = {}

    def agrees(schema, value) -> bool:  # noqa: ANN001
        key = json.dumps(schema, sort_keys=True)
        if key not in built:
            node, _ = json_schema_to_node(schema, JsonSchemaOptions())
            builder = TermBuilder()
            built[key] = (LazyDFA(builder, builder.lower(node)),
                          jsonschema.validators.validator_for(schema)(schema))
        dfa, validator = built[key]
        found = find_accepted_text(dfa, value)
        if found.text is None and found.truncated:
            return True
        return (found.text is not None) == validator.is_valid(value)

    return agrees
