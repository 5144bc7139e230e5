"""Numeric bounds and divisibility as digit regexes (character-level :mod:`...regex.tree` nodes).

Bounds are one-sided regexes (``x >= lo``, ``x <= hi``, inclusive or exclusive) over the plain
decimal syntax ``-?(0|[1-9][0-9]*)(\\.[0-9]+)?``; a bounded range is their intersection, which
the caller expresses with :func:`...regex.tree.constrained`. Exponent notation is not produced for
bounded numbers (it would make bounds non-regular in the digits), which loses no value: every
number has a plain decimal spelling.
"""

from __future__ import annotations

import math
from decimal import Decimal

from ...regex import tree as ra

DIGIT = ra.chars([(0x30, 0x39)])
NONZERO = ra.chars([(0x31, 0x39)])
DIGITS = ra.star(DIGIT)
MINUS = ra.lit("-")
NAT = ra.alt(ra.lit("0"), ra.seq(NONZERO, DIGITS))  # natural numbers, canonical
POS_INT = ra.seq(NONZERO, DIGITS)
FRACTION = ra.seq(ra.lit("."), ra.repeat(DIGIT, 1, None))
EXPONENT = ra.seq(ra.char_set("eE"), ra.opt(ra.char_set("+-")), ra.repeat(DIGIT, 1, None))
# After a number the next character is never one of these: pins number ends in lookaheads.
NUMBER_END = r"(?![0-9.eE+\-])"
INTEGER_END = r"(?![0-9])"  # the end of an integer part (a fraction may follow)


def digit_range(lo: int, hi: int) -> ra.Node:
    """One digit in ``lo..hi`` (EMPTY when empty)."""
    return ra.chars([(0x30 + lo, 0x30 + hi)]) if lo <= hi else ra.EMPTY


def _digits_at_least(s: str, strict: bool) -> ra.Node:
    """Digit strings of len(s) (leading zeros allowed) that are >= s (> s when strict)."""
    options = []
    for j, ch in enumerate(s):
        d = int(ch)
        options.append(ra.seq(ra.lit(s[:j]), digit_range(d + 1, 9),
                              ra.repeat(DIGIT, len(s) - j - 1, len(s) - j - 1)))
    if not strict:
        options.append(ra.lit(s))
    return ra.alt(*options)


def _digits_at_most(s: str, strict: bool) -> ra.Node:
    """Digit strings of len(s) (leading zeros allowed) that are <= s (< s when strict)."""
    options = []
    for j, ch in enumerate(s):
        d = int(ch)
        options.append(ra.seq(ra.lit(s[:j]), digit_range(0, d - 1),
                              ra.repeat(DIGIT, len(s) - j - 1, len(s) - j - 1)))
    if not strict:
        options.append(ra.lit(s))
    return ra.alt(*options)


def nat_at_least(n: int) -> ra.Node:
    """Canonical naturals ``>= n`` (n >= 0)."""
    if n <= 0:
        return NAT
    s = str(n)
    longer = ra.seq(NONZERO, ra.repeat(DIGIT, len(s), None))
    same = _digits_at_least(s, strict=False)  # s has no leading zero, so neither do these
    return ra.alt(same, longer)


def nat_at_most(n: int) -> ra.Node:
    """Canonical naturals ``<= n`` (EMPTY for n < 0)."""
    if n < 0:
        return ra.EMPTY
    if n < 10:
        return digit_range(0, n)
    s = str(n)
    shorter = ra.alt(ra.lit("0"), ra.seq(NONZERO, ra.repeat(DIGIT, 0, len(s) - 2)))
    same = ra.seq(ra.EPSILON, _same_length_at_most_nonzero_lead(s))
    return ra.alt(shorter, same)


def _same_length_at_most_nonzero_lead(s: str) -> ra.Node:
    first = int(s[0])
    rest = len(s) - 1
    options = [ra.seq(digit_range(1, first - 1), ra.repeat(DIGIT, rest, rest)),
               ra.seq(ra.lit(s[0]), _digits_at_most(s[1:], strict=False))]
    return ra.alt(*options)


def int_at_least(n: int) -> ra.Node:
    """Canonical integers ``>= n`` (no ``-0``)."""
    if n >= 0:
        return nat_at_least(n)
    return ra.alt(NAT, ra.seq(MINUS, _pos_at_most(-n)))


def int_at_most(n: int) -> ra.Node:
    """Canonical integers ``<= n`` (no ``-0``)."""
    if n >= 0:
        return ra.alt(nat_at_most(n), ra.seq(MINUS, POS_INT))
    return ra.seq(MINUS, nat_at_least(-n))


def _pos_at_most(n: int) -> ra.Node:
    """Canonical positive integers ``<= n``."""
    if n < 1:
        return ra.EMPTY
    if n < 10:
        return digit_range(1, n)
    s = str(n)
    shorter = ra.seq(NONZERO, ra.repeat(DIGIT, 0, len(s) - 2))
    return ra.alt(shorter, _same_length_at_most_nonzero_lead(s))


def int_range(lo: int | None, hi: int | None) -> ra.Node:
    """Canonical integers in ``[lo, hi]`` (either side open when None)."""
    base = ra.alt(NAT, ra.seq(MINUS, POS_INT))
    if lo is not None and hi is not None and lo > hi:
        return ra.EMPTY
    if lo is not None and hi is not None and hi - lo < 64:
        return ra.alt(*(ra.lit(str(v)) for v in range(lo, hi + 1)))
    require = []
    if lo is not None:
        require.append(int_at_least(lo))
    if hi is not None:
        require.append(int_at_most(hi))
    if len(require) == 1:
        return require[0]
    return ra.constrained(base, require=require, terminator=INTEGER_END)


# ---------------------------------------------------------------------------------------------
# decimals (no exponent)

def _split_decimal(d: Decimal) -> tuple[int, str]:
    """|d| as (integer part, fraction digits without trailing zeros)."""
    text = format(abs(d), "f")
    whole, _, frac = text.partition(".")
    return int(whole), frac.rstrip("0")


def _frac_at_least(f: str, strict: bool) -> ra.Node:
    """Optional fraction part (``(\\.D)?``) with 0.D >= 0.f (> when strict)."""
    if not f:
        if strict:  # need 0.D > 0
            return ra.seq(ra.lit("."), DIGITS, NONZERO, DIGITS)
        return ra.opt(FRACTION)
    options = []
    for j, ch in enumerate(f):
        options.append(ra.seq(ra.lit(f[:j]), digit_range(int(ch) + 1, 9), DIGITS))
    options.append(ra.seq(ra.lit(f), ra.seq(DIGITS, NONZERO, DIGITS) if strict else DIGITS))
    return ra.seq(ra.lit("."), ra.alt(*options))


def _frac_at_most(f: str, strict: bool) -> ra.Node:
    """Optional fraction part with 0.D <= 0.f (< when strict); f has no trailing zero."""
    if not f:
        if strict:
            return ra.EMPTY
        return ra.opt(ra.seq(ra.lit("."), ra.repeat(ra.lit("0"), 1, None)))
    options = [ra.EPSILON]  # no fraction: 0 < 0.f
    for j, ch in enumerate(f):
        options.append(ra.seq(ra.lit("." + f[:j]), digit_range(0, int(ch) - 1), DIGITS))
        if 0 < j:
            options.append(ra.lit("." + f[:j]))
    if not strict:
        options.append(ra.seq(ra.lit("." + f), ra.star(ra.lit("0"))))
    return ra.alt(*options)


def _nonneg_at_least(d: Decimal, strict: bool) -> ra.Node:
    """Non-negative plain decimals >= d (> when strict), d >= 0."""
    whole, frac = _split_decimal(d)
    bigger = ra.seq(nat_at_least(whole + 1), ra.opt(FRACTION))
    equal = ra.seq(ra.lit(str(whole)), _frac_at_least(frac, strict))
    return ra.alt(bigger, equal)


def _nonneg_at_most(d: Decimal, strict: bool) -> ra.Node:
    """Non-negative plain decimals <= d (< when strict), d >= 0."""
    whole, frac = _split_decimal(d)
    smaller = ra.seq(nat_at_most(whole - 1), ra.opt(FRACTION)) if whole >= 1 else ra.EMPTY
    equal = ra.seq(ra.lit(str(whole)), _frac_at_most(frac, strict))
    return ra.alt(smaller, equal)


PLAIN_NUMBER = ra.seq(ra.opt(MINUS), NAT, ra.opt(FRACTION))


def decimal_at_least(d: Decimal, strict: bool) -> ra.Node:
    """Plain decimals ``>= d`` (``> d`` when strict)."""
    nonneg = ra.seq(NAT, ra.opt(FRACTION))
    if d > 0 or (d == 0 and strict):
        return _nonneg_at_least(d, strict)
    # d <= 0: every non-negative number, and negatives with |x| <= |d| (< when strict)
    negative = ra.seq(MINUS, _nonneg_at_most(-d, strict))
    return ra.alt(nonneg, negative)


def decimal_at_most(d: Decimal, strict: bool) -> ra.Node:
    """Plain decimals ``<= d`` (``< d`` when strict)."""
    negative_all = ra.seq(MINUS, NAT, ra.opt(FRACTION))
    if d >= 0 and not (d == 0 and strict):
        return ra.alt(_nonneg_at_most(d, strict), negative_all)
    # d <= 0: negatives with |x| >= |d| (> when strict)
    return ra.seq(MINUS, _nonneg_at_least(-d, strict))


def decimal_range(lo: Decimal | None, lo_strict: bool, hi: Decimal | None,
                  hi_strict: bool) -> ra.Node:
    """Plain decimals between the bounds (None = open side)."""
    require = []
    if lo is not None:
        require.append(decimal_at_least(lo, lo_strict))
    if hi is not None:
        require.append(decimal_at_most(hi, hi_strict))
    if not require:
        return PLAIN_NUMBER
    if len(require) == 1:
        return require[0]
    return ra.constrained(PLAIN_NUMBER, require=require, terminator=NUMBER_END)


# ---------------------------------------------------------------------------------------------
# divisibility

def lcm_of(values: list[int]) -> int:
    """Least common multiple."""
    out = 1
    for v in values:
        out = out * v // math.gcd(out, v)
    return out


def decimal_suffix_modulus(k: int) -> int | None:
    """Digits L such that divisibility by ``k`` depends only on the last L digits, if any."""
    if k < 1:
        return None
    a = b = 0
    m = k
    while m % 2 == 0:
        m //= 2
        a += 1
    while m % 5 == 0:
        m //= 5
        b += 1
    return max(a, b) if m == 1 else None


def nat_multiple_of(k: int) -> ra.Node | None:
    """Canonical naturals divisible by ``k`` when k = 2^a 5^b (last-digits rule), else None."""
    length = decimal_suffix_modulus(k)
    if length is None:
        return None
    if length == 0:
        return NAT
    small = [ra.lit(str(v)) for v in range(0, 10 ** length, k)]
    suffixes = [ra.lit(str(v).zfill(length)) for v in range(0, 10 ** length, k)]
    long_form = ra.seq(NONZERO, DIGITS, ra.alt(*suffixes))
    return ra.alt(*small, long_form)
