"""Numbers and integers of a schema: bounds, divisors, exclusions and the digit cap."""

from __future__ import annotations

from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal

from ...regex import tree as ra
from . import number_ranges as nr
from .context import SchemaContext
from .decimal_residues import decimal_multiples, integer_residues
from .facts import Facts, json_type_of
from .multiples import decimal_lcm, decimal_multiple_node, integer_divisor

_MAX_ENUMERATED_MULTIPLES = 2000
MAX_RESIDUE_MODULUS = 1_000_000  # residue automata states, at most (lazily built)


def _int_bounds(f: Facts) -> tuple[int | None, int | None]:
    lo = hi = None
    if f.lo is not None:
        lo = int(f.lo.to_integral_value(rounding=ROUND_FLOOR)) + 1 if f.lo_strict else \
            int(f.lo.to_integral_value(rounding=ROUND_CEILING))
    if f.hi is not None:
        hi = int(f.hi.to_integral_value(rounding=ROUND_CEILING)) - 1 if f.hi_strict else \
            int(f.hi.to_integral_value(rounding=ROUND_FLOOR))
    return lo, hi


def _capped_nat(digits: int | None) -> ra.Node:
    if digits is None:
        return nr.NAT
    return ra.alt(ra.lit("0"), ra.seq(nr.NONZERO, ra.repeat(nr.DIGIT, 0, digits - 1)))


def _digit_cap(digits: int, integer: bool) -> ra.Node:
    """Numbers whose integer, fraction and exponent parts have at most ``digits`` digits."""
    nat = _capped_nat(digits)
    if integer:
        return ra.seq(ra.opt(nr.MINUS), nat)
    frac = ra.opt(ra.seq(ra.lit("."), ra.repeat(nr.DIGIT, 1, digits)))
    exp = ra.opt(ra.seq(ra.char_set("eE"), ra.opt(ra.char_set("+-")),
                        ra.repeat(nr.DIGIT, 1, digits)))
    return ra.seq(ra.opt(nr.MINUS), nat, frac, exp)


def _signed(node: ra.Node) -> ra.Node:
    return ra.alt(node, ra.seq(nr.MINUS, node))


def _integer_divisors(f: Facts) -> int | None:
    """k such that an integer satisfies every multipleOf iff k divides it (None when none):
    an integer is a multiple of m / 10^s iff it is one of m / gcd(m, 10^s)."""
    return nr.lcm_of([integer_divisor(k) for k in f.multiples]) if f.multiples else None


def _integer_multiples(k: int) -> ra.Node:
    """Canonical integers divisible by ``k``: last digits for 2^a 5^b, else the residue
    automaton."""
    mult = nr.nat_multiple_of(k)
    return _signed(mult if mult is not None else decimal_multiples(k, 0, fraction=False))


def _multiples_node(k: int, lo: int | None, hi: int | None) -> ra.Node:
    if nr.nat_multiple_of(k) is None and lo is not None and hi is not None and \
            (hi - lo) // k <= _MAX_ENUMERATED_MULTIPLES:
        first = -(-lo // k) * k  # few multiples: listed (prints compactly)
        return ra.alt(*(ra.lit(str(v)) for v in range(first, hi + 1, k)))
    return _integer_multiples(k)


def _integer_node(c: SchemaContext, f: Facts, excluded: list) -> ra.Node:
    if f.non_integer:
        return ra.EMPTY
    lo, hi = _int_bounds(f)
    if lo is not None and hi is not None and lo > hi:
        return ra.EMPTY
    require = []
    k = _integer_divisors(f)
    not_k = tuple(sorted({integer_divisor(m) for m in f.not_multiples}))
    modulus = nr.lcm_of([k or 1, *not_k])
    residues = bool(not_k) and modulus <= MAX_RESIDUE_MODULUS
    if residues:
        # multipleOf and not multipleOf together: one residue automaton, no complement
        unsigned = integer_residues(k or 1, not_k, modulus)
        if hi is None and lo is not None and 0 <= lo <= 1:
            # 0 is a multiple of every excluded divisor: the unsigned ones are all >= 1
            lo = None
            require.append(unsigned)
        else:
            require.append(_signed(unsigned))
    elif k is not None and k > 1:
        require.append(_multiples_node(k, lo, hi))
    if c.options.max_number_digits is not None:
        require.append(_digit_cap(c.options.max_number_digits, integer=True))
    forbid = [ra.lit(str(int(v))) for v in excluded]
    if not residues:
        forbid += [_integer_multiples(m) for m in not_k]
    if lo is None and hi is None and len(require) == 1 and not forbid:
        core = require[0]  # a subset of the integers: no intersection (no liveness search)
    else:
        core = ra.constrained(nr.int_range(lo, hi), require, forbid,
                              terminator=nr.INTEGER_END)
    if c.document.integer_fraction:  # 5.0 is an integer too (draft 6+)
        zeros = ra.repeat(ra.lit("0"), 1, c.options.max_number_digits)
        return ra.seq(core, ra.opt(ra.seq(ra.lit("."), zeros)))
    return core


def _value_spellings(v: float | int) -> ra.Node:
    """Plain-decimal spellings of a number (trailing fraction zeros allowed)."""
    d = Decimal(repr(v)) if isinstance(v, float) else Decimal(v)
    text = format(d, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    frac_zeros = ra.opt(ra.seq(ra.lit("."), ra.repeat(ra.lit("0"), 1, None)))
    if "." in text:
        return ra.seq(ra.lit(text), ra.star(ra.lit("0")))
    neg_zero = ra.seq(ra.lit("-0"), frac_zeros) if text == "0" else ra.EMPTY
    return ra.alt(ra.seq(ra.lit(text), frac_zeros), neg_zero)


def number_node(c: SchemaContext, f: Facts, integer_only: bool) -> ra.Node:
    """Regex tree of the numbers (integers when ``integer_only``) allowed by ``f``."""
    divisor = decimal_lcm(f.multiples) if f.multiples else None
    if divisor is not None and divisor == divisor.to_integral_value():
        integer_only = True  # every multiple of an integer is an integer
    excluded = [v for v in f.not_values if json_type_of(v) in ("integer", "number")]
    if integer_only:
        return _integer_node(c, f, [v for v in excluded if json_type_of(v) == "integer"])
    plain = f.lo is not None or f.hi is not None or excluded or f.non_integer or \
        f.not_multiples or divisor is not None
    digits = c.options.max_number_digits
    if not plain:
        base = ra.seq(ra.opt(nr.MINUS), nr.NAT, ra.opt(nr.FRACTION), ra.opt(nr.EXPONENT))
        require = [_digit_cap(digits, integer=False)] if digits is not None else []
        return ra.constrained(base, require, terminator=nr.NUMBER_END)
    require = []
    if f.lo is not None:
        require.append(nr.decimal_at_least(f.lo, f.lo_strict))
    if f.hi is not None:
        require.append(nr.decimal_at_most(f.hi, f.hi_strict))
    if divisor is not None:
        require.append(decimal_multiple_node(divisor))
    if f.non_integer:
        require.append(ra.seq(ra.opt(nr.MINUS), nr.NAT, ra.lit("."), nr.DIGITS, nr.NONZERO,
                              nr.DIGITS))
    if digits is not None:
        require.append(_digit_cap(digits, integer=False))
    forbid = [_value_spellings(v) for v in excluded]
    forbid += [decimal_multiple_node(m) for m in f.not_multiples]
    if len(require) == 1 and not forbid and divisor is not None:
        return require[0]  # the multiples alone: a subset of PLAIN_NUMBER, no intersection
    return ra.constrained(nr.PLAIN_NUMBER, require, forbid, terminator=nr.NUMBER_END)
