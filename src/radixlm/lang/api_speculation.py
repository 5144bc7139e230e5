"""API speculative execution (``@function(num_api_spec_tokens=N)``), for API backends whose
requests cost a round trip (and a prompt) each, as SGLang's OpenAI backend has it.

* **Completion models** (:class:`CompletionSpeculation`): the first ``gen`` asks for ``N``
  tokens without its stop strings; the gen takes the text up to its first stop string, and
  the rest is kept. Each following fill must match the head of the kept text (it is then
  consumed) or the kept text is dropped; a following ``gen`` whose stop string occurs in the
  kept text is answered from it without a request, as is one whose stop string is not in
  it when the model ended the text itself (its end is the gen's end). Anything else (no
  stop string, a constraint, a select, a kept text cut by the token budget before the stop
  string) drops the kept text and runs as an ordinary request, so speculation never
  changes what a gen may answer, only where it is asked.
* **Chat models** (:class:`ChatSpeculation`): a chat model answers whole assistant messages,
  so the fills and gens inside an assistant role are recorded, not run; at the role's end one
  request of ``N`` tokens answers the message, and the message is matched against the
  recorded pattern (fills literally, each gen up to its stop string). A message that does
  not match is asked for again when sampled (at most ``MAX_TRIES`` requests; at
  temperature 0 the answer would be the same); when none matches, the gens
  that could not be matched are empty and their ``meta_info`` says so (SGLang's behaviour:
  a format the model did not follow is the model's answer, not a framework error).

State lives on the program's executor, never on the backend, so concurrent programs
(``run_batch``) speculate independently.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .sampling import SglSamplingParams

MAX_TRIES = 3
# Generates ``(text, meta_info)`` for the program's current state with these params.
Generate = Callable[["SglSamplingParams"], tuple[Any, Any]]


def _first_stop(text: str, stops: list[str]) -> int:
    """Position of the earliest stop string in ``text``, or -1."""
    found = [p for p in (text.find(s) for s in stops if s) if p >= 0]
    return min(found) if found else -1


def _constrained(params: SglSamplingParams) -> bool:
    """A gen whose text a constraint shapes (or with several samples): never speculated."""
    return (params.dtype is not None or params.regex is not None or params.ebnf is not None
            or params.json_schema is not None or bool(params.tools) or (params.n or 1) != 1)


def _speculable(params: SglSamplingParams) -> bool:
    """A plain gen that ends at a stop string."""
    return bool(params.stop_list()) and not _constrained(params)


def _model_ended(meta: Any) -> bool:
    """Whether the model ended the text (EOS or a stop token), not the token budget."""
    reason = meta.get("finish_reason") if isinstance(meta, dict) else None
    if isinstance(reason, dict):
        reason = reason.get("type")
    return reason == "stop"


def _ahead(params: SglSamplingParams, num_tokens: int) -> SglSamplingParams:
    """``params`` asking for ``num_tokens`` (at least) without stop strings."""
    out = params.clone()
    out.max_new_tokens = max(params.max_new_tokens or 0, num_tokens)
    out.stop = None
    return out


class CompletionSpeculation:
    """Text a completion model generated ahead of the program (see the module docstring)."""

    def __init__(self, num_tokens: int) -> None:
        self.num_tokens = num_tokens
        self.kept = ""  # generated text the program has not consumed yet
        self.ended = False  # the model ended ``kept`` itself (so a gen may take it all)

    def fill(self, value: str) -> None:
        self.kept = self.kept[len(value):] if self.kept.startswith(value) else ""

    def drop(self) -> None:
        self.kept = ""

    def gen(self, params: SglSamplingParams, generate: Generate) -> tuple[str, Any] | None:
        """The gen's text and meta_info from speculated text, or None: run it as a request."""
        if not _speculable(params):
            self.kept = ""
            return None
        meta: Any = {"speculative": "from the text generated ahead"}
        if not self.kept:
            text, meta = generate(_ahead(params, self.num_tokens))
            self.kept = text if isinstance(text, str) else text[0]
            self.ended = _model_ended(meta)
        pos = _first_stop(self.kept, params.stop_list())
        if pos < 0 and self.ended:
            pos = len(self.kept)
        if pos < 0:
            self.kept = ""
            return None
        comp, self.kept = self.kept[:pos], self.kept[pos:]
        return comp, meta


@dataclass
class _Term:
    """One recorded piece of an assistant message: fixed text, or a gen (name, stops)."""

    text: str = ""
    name: str | None = None
    stops: list[str] | None = None  # None for a fill
    matched: bool = False


@dataclass
class ChatSpeculation:
    """The recorded pattern of the current assistant message (see the module docstring)."""

    num_tokens: int
    terms: list[_Term] = field(default_factory=list)
    params: SglSamplingParams | None = None

    def fill(self, value: str) -> None:
        self.terms.append(_Term(text=value))

    def gen(self, name: str | None, params: SglSamplingParams) -> None:
        if _constrained(params):
            raise ValueError("num_api_spec_tokens on a chat model: a gen inside an assistant "
                             "message can only end at stop strings (no regex, json_schema, "
                             "dtype, tools or n > 1)")
        if self.params is None:
            self.params = _ahead(params, self.num_tokens)
        elif _ahead(params, self.num_tokens) != self.params:
            raise ValueError("num_api_spec_tokens on a chat model: the gens of one assistant "
                             "message share one request, so their sampling parameters (all "
                             "but stop) must be equal")
        self.terms.append(_Term(name=name, stops=params.stop_list()))

    def finish(self, generate: Generate) -> tuple[list[_Term], Any]:
        """Answer the message with one request (up to ``MAX_TRIES``); the terms, matched."""
        terms, self.terms, params, self.params = self.terms, [], self.params, None
        if params is None:  # fills only: nothing to ask
            return terms, None
        meta: Any = None
        for _ in range(MAX_TRIES if params.temperature else 1):
            text, meta = generate(params)
            if _match(terms, text if isinstance(text, str) else text[0]):
                break
        return terms, meta


def _match(terms: list[_Term], message: str) -> bool:
    """Fill the gen terms from ``message``; True when every term matched."""
    for term in terms:
        if term.stops is not None:
            term.text, term.matched = "", False
    rest = message
    for i, term in enumerate(terms):
        if term.stops is None:  # a fill: the message must go on with it
            if not rest.startswith(term.text):
                return False
            rest = rest[len(term.text):]
            continue
        pos = _first_stop(rest, term.stops) if term.stops else -1
        if pos < 0 and i < len(terms) - 1:
            return False
        term.text, rest = (rest, "") if pos < 0 else (rest[:pos], rest[pos:])
        term.matched = True
    return True
