"""``multipleOf`` with any decimal divisor, exactly on the decimal text.

A divisor ``d = m / 10^s`` (``m`` a positive integer, ``s`` fraction digits) divides a plain
decimal ``x = N.F`` iff ``x * 10^s`` is an integer divisible by ``m``: the fraction has at
most ``s`` significant digits and the scaled integer is divisible by ``m``. When
``m = 2^a 5^b`` its last digits decide that (the last-digits rule of
:func:`.number_ranges.nat_multiple_of`), which prints as a compact regex; every other ``m``
(3, 0.3 = 3/10, 0.07) is a residue automaton over the digits
(:mod:`.decimal_residues`), also exact. The exact decimal value is meant (the JSON Schema
definition); ``jsonschema`` divides binary floats instead, so on inputs such as ``0.07`` /
``0.01`` it answers differently. Numbers with an exponent are not produced (``1e-2`` is
spelled ``0.01``): "significant fraction digits minus exponent" is not a regular condition.
"""

from __future__ import annotations

import math
from decimal import Decimal

from ...regex import tree as ra
from . import number_ranges as nr
from .decimal_residues import decimal_multiples

MAX_SUFFIXES = 2000  # allowed last-digit strings per fraction length, at most


def split_divisor(d: Decimal) -> tuple[int, int]:
    """(m, s) with ``d == m / 10**s`` and ``s >= 0`` as small as possible."""
    sign, digits, exponent = d.normalize().as_tuple()
    m = int("".join(map(str, digits)))
    if exponent >= 0:
        return m * 10 ** exponent, 0
    return m, -exponent


def integer_divisor(d: Decimal) -> int:
    """The k such that an integer is a multiple of ``d`` iff it is a multiple of k."""
    m, s = split_divisor(d)
    return m // math.gcd(m, 10 ** s)


def _nat_ending_with(u: str) -> ra.Node:
    """Canonical naturals whose last ``len(u)`` digits are ``u`` (shorter ones zero-padded)."""
    return ra.alt(ra.lit(str(int(u))), ra.seq(nr.NONZERO, nr.DIGITS, ra.lit(u)))


def _suffixes(k: int) -> list[str] | None:
    """The last-digit strings (zero-padded) of the multiples of k, or None if too many."""
    length = nr.decimal_suffix_modulus(k)
    if length is None or 10 ** length // k > MAX_SUFFIXES:
        return None
    return [str(v).zfill(length) for v in range(0, 10 ** length, k)] if length else [""]


def decimal_multiple_node(d: Decimal) -> ra.Node:
    """Plain decimals (``-?NAT(.DIGITS)?``) that are multiples of ``d``: by last digits when
    ``m`` is 2^a 5^b with few suffixes, else by the residue automaton."""
    m, s = split_divisor(d)
    node = _suffix_multiple_node(m, s)
    return ra.seq(ra.opt(nr.MINUS), node if node is not None else
                  decimal_multiples(m, s, fraction=True))


def _suffix_multiple_node(m: int, s: int) -> ra.Node | None:
    """Unsigned plain decimals that are multiples of ``m / 10^s`` by the last-digits rule;
    None when ``m`` is not 2^a 5^b or needs too many suffixes."""
    zeros = ra.star(ra.lit("0"))
    options = []
    for j in range(s + 1):  # j significant fraction digits, then only zeros
        k = m // math.gcd(m, 10 ** (s - j))  # the scaled integer N F1..Fj must divide by k
        suffixes = _suffixes(k)
        if suffixes is None:
            return None
        if j == 0:
            nat = nr.nat_multiple_of(k)
            options.append(ra.seq(nat, ra.opt(ra.seq(ra.lit("."), ra.repeat(ra.lit("0"), 1,
                                                                               None)))))
            continue
        t = len(suffixes[0])
        if t <= j:
            frac = ra.seq(ra.repeat(nr.DIGIT, j - t, j - t), ra.alt(*map(ra.lit, suffixes)))
            options.append(ra.seq(nr.NAT, ra.lit("."), frac, zeros))
            continue
        by_head: dict[str, list[str]] = {}
        for w in suffixes:
            by_head.setdefault(w[: t - j], []).append(w[t - j:])
        for head, tails in by_head.items():
            options.append(ra.seq(_nat_ending_with(head), ra.lit("."),
                                  ra.alt(*map(ra.lit, tails)), zeros))
    return ra.alt(*options)


def decimal_lcm(values: list[Decimal]) -> Decimal:
    """The least positive decimal that every value divides (their multiples' intersection
    is exactly the multiples of it)."""
    parts = [split_divisor(v) for v in values]
    scale = max(s for _, s in parts)
    ints = [m * 10 ** (scale - s) for m, s in parts]
    return Decimal(nr.lcm_of(ints)).scaleb(-scale)
