"""Stage 1, the regex language: character-level regex trees, the regex parser, UTF-8 ranges.

* :mod:`.tree` -- the immutable regex tree (a DAG; smart constructors, :func:`~.tree.render`);
* :mod:`.parser` -- regex text to a tree (the subset of syntax ``pattern`` and specs use);
* :mod:`.utf8` -- a code point range as UTF-8 byte sequences (lowering to bytes).

May import :mod:`radixlm.fsm.errors` only (no other fsm stage). No re-exports.
"""
