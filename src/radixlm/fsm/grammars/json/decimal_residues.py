"""Plain decimals that are multiples of ``m / 10^s``, as a residue automaton.

``x = N.F`` is a multiple of ``m / 10^s`` iff ``x * 10^s`` is an integer divisible by ``m``:
``F`` has at most ``s`` significant digits and, with ``F`` zero-padded to ``s`` digits, the
digit string ``N F`` read as an integer is divisible by ``m``. Reading that string left to
right, its value mod ``m`` is all that has to be remembered (``r -> (10 r + d) mod m``), so
the language is regular for every ``m``, with at most ``m (s + 3) + 2`` states. Its regex form is
another matter (state elimination over a residue graph grows exponentially: the multiples of
3 print in a few hundred characters, those of 7 in hundreds of thousands), so the automaton is
an :class:`...regex.tree.Automaton` leaf whose derivatives are its own transitions; it is printed
as a regex only when small. Only plain spellings ``-?(0|[1-9][0-9]*)(\\.[0-9]+)?`` are read
(without the sign: callers prefix it); exponents are never accepted.

States (every one the machine returns is live, as the :class:`...regex.tree.AsciiMachine`
contract requires): ``("S",)`` before the first digit; ``("Z",)`` after an integer part
``0``; ``("I", r)`` inside a non-zero integer part with residue ``r``; ``("D", r)`` just after
the dot; ``("F", r, j)`` after ``j`` fraction digits (``j == s``: only zeros may follow).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

from ...regex import tree as ra

_DIGITS = range(0x30, 0x3A)
_DOT = 0x2E
_ALPHABET = (*_DIGITS, _DOT)
_FULL = (1 << 256) - 1
MAX_PRINTED_STATES = 12  # past this many states the regex text is refused (too large)

State = tuple


@dataclass(frozen=True, eq=False)
class DecimalMultiples:
    """The automaton of plain unsigned decimals (integers only unless ``fraction``) that are
    multiples of ``m / 10**s``. Build through :func:`decimal_multiples` (shared instances)."""

    m: int
    s: int
    fraction: bool
    start: ClassVar[State] = ("S",)

    def __post_init__(self) -> None:
        if self.m < 1 or self.s < 0 or (self.s and not self.fraction):
            raise ValueError(f"decimal multiples: need m >= 1, s >= 0 and s == 0 for integers, "
                             f"got m={self.m}, s={self.s}, fraction={self.fraction}")

    def _fraction_live(self, r: int, j: int) -> bool:
        """Whether ``s - j`` more fraction digits can complete residue ``r`` to a multiple:
        some ``v < 10^(s-j)`` has ``r 10^(s-j) + v = 0 (mod m)``."""
        room = 10 ** (self.s - j)
        return (-r * room) % self.m < room

    def accepting(self, state: Hashable) -> bool:
        """Integer part: ``N 10^s`` divisible; after ``j`` fraction digits (>= 1): ``N F``
        padded with ``s - j`` zeros divisible."""
        tag = state[0]
        if tag == "Z":
            return True
        if tag == "I":
            return state[1] * 10 ** self.s % self.m == 0
        if tag == "F":
            return state[1] * 10 ** (self.s - state[2]) % self.m == 0
        return False  # before the first digit, just after the dot

    def step(self, state: Hashable, byte: int) -> State | None:
        """The next state (None: no multiple is spelled this way)."""
        tag = state[0]
        digit = byte - 0x30 if 0x30 <= byte <= 0x39 else None
        if byte == _DOT:
            if tag not in ("Z", "I") or not self.fraction:
                return None
            r = state[1] if tag == "I" else 0
            return ("D", r) if self._fraction_live(r, 0) else None
        if digit is None:
            return None
        if tag == "S":
            return ("Z",) if digit == 0 else ("I", digit % self.m)
        if tag == "I":
            return ("I", (10 * state[1] + digit) % self.m)
        if tag in ("D", "F"):
            r, j = state[1], state[2] if tag == "F" else 0
            if j == self.s:  # no significant digit left: only zeros, residue unchanged
                return ("F", r, j) if digit == 0 else None
            nxt = (10 * r + digit) % self.m
            return ("F", nxt, j + 1) if self._fraction_live(nxt, j + 1) else None
        return None  # "Z": no digit after a leading zero

    def classes(self, state: Hashable) -> tuple[int, ...]:
        """Bytes grouped by their successor (every byte outside digits and dot: none)."""
        return _classes(self, state, _ALPHABET)

    def to_node(self, state: Hashable) -> ra.Node:
        """The language from ``state`` as a regex tree, by state elimination; refused past
        :data:`MAX_PRINTED_STATES` reachable states (the text would be huge)."""
        states = self._reachable(state)
        if len(states) > MAX_PRINTED_STATES:
            raise ra.RenderTooLargeError(
                f"multipleOf {self.m}/10^{self.s} has a {len(states)}-state residue automaton; "
                f"its regex text is too large to print (the automaton itself is exact)")
        return _eliminate(self, state, states)

    def _reachable(self, state: State) -> list[State]:
        return _reachable(self, state)


@dataclass(frozen=True, eq=False)
class IntegerResidues:
    """The automaton of canonical unsigned integers (``0|[1-9][0-9]*``) that are multiples
    of ``k`` and of none of ``not_k``, all dividing ``modulus``: the value mod ``modulus``
    decides, read left to right (``r -> (10 r + d) mod modulus``). Some residue must be
    accepted (:func:`integer_residues` checks): then every state is live, since ``j`` more
    digits with ``10^j >= modulus`` reach every residue. States: ``("S",)`` before the first
    digit, ``("Z",)`` after a lone ``0``, ``("I", r)`` inside a non-zero integer."""

    modulus: int
    k: int
    not_k: tuple[int, ...]
    start: ClassVar[State] = ("S",)

    def accepts_residue(self, r: int) -> bool:
        """Whether an integer with residue ``r`` is a multiple of k and of no ``not_k``."""
        return r % self.k == 0 and all(r % m for m in self.not_k)

    def accepting(self, state: Hashable) -> bool:
        """A lone 0 or a non-zero integer whose residue is accepted."""
        return state[0] == "Z" or (state[0] == "I" and self.accepts_residue(state[1]))

    def step(self, state: Hashable, byte: int) -> State | None:
        """The next state (None: no accepted integer is spelled this way)."""
        if not 0x30 <= byte <= 0x39 or state[0] == "Z":
            return None
        digit = byte - 0x30
        if state[0] == "S":
            if digit == 0:
                return ("Z",) if self.accepts_residue(0) else None
            return ("I", digit % self.modulus)
        return ("I", (10 * state[1] + digit) % self.modulus)

    def classes(self, state: Hashable) -> tuple[int, ...]:
        """Bytes grouped by their successor (every byte but a digit: none)."""
        return _classes(self, state, _DIGITS)

    def to_node(self, state: Hashable) -> ra.Node:
        """The language from ``state`` as a regex tree (refused past
        :data:`MAX_PRINTED_STATES` reachable states)."""
        states = _reachable(self, state)
        if len(states) > MAX_PRINTED_STATES:
            raise ra.RenderTooLargeError(
                f"integers mod {self.modulus} have a {len(states)}-state residue automaton; "
                f"its regex text is too large to print (the automaton itself is exact)")
        return _eliminate(self, state, states)


def integer_residues(k: int, not_k: tuple[int, ...], modulus: int) -> ra.Node:
    """Canonical unsigned integers that are multiples of ``k`` and of none of ``not_k``
    (each dividing ``modulus``), as an automaton leaf; EMPTY when there is none."""
    machine = IntegerResidues(modulus, k, not_k)
    if not any(machine.accepts_residue(r) for r in range(0, modulus, k)):
        return ra.EMPTY
    return ra.Automaton(machine, machine.start)


def _classes(machine: DecimalMultiples | IntegerResidues, state: State,
             alphabet: Iterable[int]) -> tuple[int, ...]:
    """The bytes grouped by ``machine``'s successor of ``state`` (outside ``alphabet``: none)."""
    groups: dict[State | None, int] = {}
    rest = _FULL
    for byte in alphabet:
        nxt = machine.step(state, byte)
        groups[nxt] = groups.get(nxt, 0) | (1 << byte)
        rest ^= 1 << byte
    groups[None] = groups.get(None, 0) | rest
    return tuple(groups.values())


def _reachable(machine: DecimalMultiples | IntegerResidues, state: State) -> list[State]:
    """States reachable from ``state`` (stopping just past :data:`MAX_PRINTED_STATES`)."""
    seen, order = {state}, [state]
    for u in order:
        for byte in _ALPHABET:
            v = machine.step(u, byte)
            if v is not None and v not in seen:
                if len(order) > MAX_PRINTED_STATES:
                    return order + [v]
                seen.add(v)
                order.append(v)
    return order


def _eliminate(machine: DecimalMultiples | IntegerResidues, start: State,
               states: list[State]) -> ra.Node:
    """Brzozowski-McCluskey state elimination: a generalised automaton with a fresh initial
    and final node whose edges are regex trees; removing a state q rewires p -> q -> r as
    ``R(p,r) | R(p,q) R(q,q)* R(q,r)``."""
    init, final = "init", "final"
    edges: dict[tuple, ra.Node] = {(init, start): ra.EPSILON}
    for u in states:
        by_target: dict[State, list[int]] = {}
        for byte in _ALPHABET:
            v = machine.step(u, byte)
            if v is not None:
                by_target.setdefault(v, []).append(byte)
        for v, bytes_ in by_target.items():
            edges[(u, v)] = ra.chars((b, b) for b in bytes_)
        if machine.accepting(u):
            edges[(u, final)] = ra.EPSILON
    left = list(states)
    while left:
        # fewest rewired pairs first keeps the tree small
        q = min(left, key=lambda x: sum(1 for (a, b) in edges if b == x and a != x) *
                sum(1 for (a, b) in edges if a == x and b != x))
        left.remove(q)
        loop = edges.pop((q, q), None)
        middle = ra.star(loop) if loop is not None else ra.EPSILON
        ins = [(p, n) for (p, x), n in edges.items() if x == q]
        outs = [(r, n) for (x, r), n in edges.items() if x == q]
        for p, _ in ins:
            del edges[(p, q)]
        for r, _ in outs:
            del edges[(q, r)]
        for p, into in ins:
            for r, out in outs:
                path = ra.seq(into, middle, out)
                old = edges.get((p, r))
                edges[(p, r)] = path if old is None else ra.alt(old, path)
    return edges.get((init, final), ra.EMPTY)


@lru_cache(maxsize=256)
def decimal_multiples(m: int, s: int, fraction: bool) -> ra.Node:
    """Plain unsigned decimals (integers when not ``fraction``) that are multiples of
    ``m / 10**s``, as an automaton leaf (one shared machine per divisor)."""
    machine = DecimalMultiples(m, s, fraction)
    return ra.Automaton(machine, machine.start)
