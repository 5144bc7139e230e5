"""Text-level lookup: propose the TEXT that followed the latest earlier occurrence of the
output's recent text (bytes), for the drafter to tokenize the way the model would write it.

Token-id lookup (:mod:`ngram_lookup`) misses where the model copies text with other tokens than
the source has: a value copied into JSON (`` Ines`` in a document, ``In`` ``es`` after a quote
in the output) or a key boundary (``":`` as one token where the grammar forces ``age"``). Here
the match is over bytes: the longest suffix of the output's tail (``min_bytes`` to
``max_bytes``) that occurs earlier in the request's prompt text, else in the text of finished
outputs (:class:`SharedText`, per cache namespace), and the proposal is the ``span`` bytes
after its latest occurrence. Finding the longest suffix is a binary search over its length
(a suffix that occurs has every shorter suffix occurring too), each probe one
``bytes.rfind``.

A copied word ends where the source's sentence goes on but the output's structure does not
(``Ines`` is followed by ``, aged`` in the document and by ``", "age": `` in the JSON). So when
the output ends inside a word and the continuation ends that word, the rest comes from the
finished outputs' text instead: what followed the output's text before the word (its
skeleton, e.g. ``{"name": "``) there, past the word that stood in it (another value). Like
every draft source it is only a guess that the model verifies.
"""

from __future__ import annotations

from collections import OrderedDict

# bytes of a word (letters, digits, any byte of a multi-byte UTF-8 character)
_WORD = frozenset(b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") | \
    frozenset(range(0x80, 0x100))


def _word_run(text: bytes, start: int, step: int) -> int:
    """How many word bytes run from ``text[start]`` in direction ``step`` (1 or -1)."""
    n, i = 0, start
    while 0 <= i < len(text) and text[i] in _WORD:
        n, i = n + 1, i + step
    return n


def _longest_match(corpus: bytes, tail: bytes, lo: int, hi: int) -> tuple[int, int]:
    """(length, end) of the longest suffix of ``tail`` with ``lo <= length <= hi`` that occurs
    in ``corpus`` with at least one byte after it (``end``: where its latest occurrence ends);
    (0, 0) when none does."""
    hi = min(hi, len(tail))
    best = (0, 0)
    while lo <= hi:
        mid = (lo + hi) // 2
        pos = corpus.rfind(tail[-mid:], 0, len(corpus) - 1)
        if pos < 0:
            hi = mid - 1
        else:
            best = (mid, pos + mid)
            lo = mid + 1
    return best


class SharedText:
    """The text of recently finished outputs, per cache namespace (the newest ``capacity``
    bytes of each, oldest namespaces dropped past ``namespaces``)."""

    def __init__(self, capacity: int = 16_384, namespaces: int = 64) -> None:
        self.capacity, self.namespaces = capacity, namespaces
        self._text: OrderedDict[str, bytes] = OrderedDict()

    def add(self, namespace: str, text: bytes) -> None:
        """A finished output's text joins its namespace's (a newline between outputs)."""
        if not text:
            return
        joined = self._text.pop(namespace, b"") + text + b"\n"
        self._text[namespace] = joined[-self.capacity :]
        while len(self._text) > self.namespaces:
            self._text.popitem(last=False)

    def get(self, namespace: str) -> bytes:
        return self._text.get(namespace, b"")


class TextLookup:
    """One request's text lookup over its prompt text, then the shared text (see module
    doc)."""

    __slots__ = ("prompt", "min_bytes", "max_bytes", "span")

    def __init__(self, prompt: bytes, min_bytes: int = 2, max_bytes: int = 32,
                 span: int = 48) -> None:
        if not 1 <= min_bytes <= max_bytes:
            raise ValueError(f"need 1 <= min_bytes <= max_bytes, got {min_bytes}, {max_bytes}")
        self.prompt = prompt
        self.min_bytes, self.max_bytes, self.span = min_bytes, max_bytes, span

    def propose(self, tail: bytes, shared: bytes = b"", least: int = 0) -> bytes:
        """The bytes likely to follow ``tail`` (the output's recent text, with any text the
        constraint forces after it): from the corpus with the longer match, the prompt on a
        tie; b"" when neither matches ``max(min_bytes, least)`` bytes."""
        best, corpus = (0, 0), b""
        least = max(self.min_bytes, least)
        for text in (self.prompt, shared):
            if len(text) > least:
                match = _longest_match(text, tail, max(least, best[0] + 1), self.max_bytes)
                if match[0] > best[0]:
                    best, corpus = match, text
        if not best[0]:
            return b""
        more = corpus[best[1] : best[1] + self.span]
        word = _word_run(tail, len(tail) - 1, -1)
        end = _word_run(more, 0, 1)
        if word and end < len(more) and len(shared) > self.min_bytes:
            size, after = _longest_match(shared, tail[:-word], self.min_bytes, self.max_bytes)
            if size:  # the word's end, then the skeleton's continuation past its own word
                after += _word_run(shared, after, 1)
                more = (more[:end] + shared[after : after + self.span])[: self.span]
        return more
