"""A chain of draft tokens for one request, and which source proposed each."""

from __future__ import annotations

from dataclasses import dataclass, field

# Source names, as the acceptance statistics report them.
SOURCE_GRAMMAR = "grammar"  # text the request's constraint forces
SOURCE_PROMPT_LOOKUP = "prompt_lookup"  # the request's own prompt and output
SOURCE_CROSS_REQUEST = "cross_request"  # outputs of requests that finished
SOURCE_TEXT_LOOKUP = "text_lookup"  # the prompt's (or finished outputs') text, retokenized
SOURCES = (SOURCE_GRAMMAR, SOURCE_PROMPT_LOOKUP, SOURCE_CROSS_REQUEST, SOURCE_TEXT_LOOKUP)


@dataclass
class DraftChain:
    """Draft tokens in order (position ``i`` is proposed to follow ``tokens[:i]``) and the
    source of each (``sources[i]`` names ``tokens[i]``'s)."""

    tokens: list[int] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.tokens)

    def extend(self, tokens: list[int], source: str) -> None:
        self.tokens.extend(tokens)
        self.sources.extend([source] * len(tokens))

    def cut(self, n: int) -> None:
        """Keep the first ``n`` drafts."""
        del self.tokens[n:], self.sources[n:]
