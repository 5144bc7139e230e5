"""JSON Schema ``format`` values as character-level regexes (of the decoded string).

Each regex matches a subset of what ``jsonschema``'s format checker accepts (so generated values
always validate) that covers the usual spellings: dates are calendar-exact (leap years
included), ``hostname`` follows RFC 1035's preferred syntax with its 253-character limit,
``uri``/``uri-reference`` follow RFC 3986 (host as reg-name, which covers IPv4 literals).
"""

from __future__ import annotations

from collections.abc import Callable

from ...regex import tree as ra
from ...regex.parser import regex_to_node

_YEAR = r"(?:[1-9][0-9]{3}|0[1-9][0-9]{2}|00[1-9][0-9]|000[1-9])"
_MONTH_DAY = (r"(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
              r"|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
              r"|02-(?:0[1-9]|1[0-9]|2[0-8]))")
_LEAP_YEAR = r"(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)"
DATE = rf"(?:{_YEAR}-{_MONTH_DAY}|{_LEAP_YEAR}-02-29)"
_HOUR = r"(?:[01][0-9]|2[0-3])"
TIME = rf"{_HOUR}:[0-5][0-9]:[0-5][0-9](?:\.[0-9]+)?(?:Z|[+-]{_HOUR}:[0-5][0-9])"
DATE_TIME = rf"{DATE}T{TIME}"
UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9][0-9]|[0-9])"
IPV4 = rf"{_OCTET}(?:\.{_OCTET}){{3}}"
_H = r"[0-9a-fA-F]{1,4}"
IPV6 = (rf"(?:(?:{_H}:){{7}}{_H}|(?:{_H}:){{1,7}}:|(?:{_H}:){{1,6}}:{_H}"
        rf"|(?:{_H}:){{1,5}}(?::{_H}){{1,2}}|(?:{_H}:){{1,4}}(?::{_H}){{1,3}}"
        rf"|(?:{_H}:){{1,3}}(?::{_H}){{1,4}}|(?:{_H}:){{1,2}}(?::{_H}){{1,5}}"
        rf"|{_H}:(?::{_H}){{1,6}}|:(?:(?::{_H}){{1,7}}|:)"
        rf"|(?:{_H}:){{6}}{IPV4}|::(?:[fF]{{4}}:)?{IPV4})")
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME_SHAPE = rf"{_LABEL}(?:\.{_LABEL})*\.?"
_ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]"
EMAIL = rf"{_ATEXT}+(?:\.{_ATEXT}+)*@{_LABEL}(?:\.{_LABEL})*"
# RFC 3986
_UNRESERVED = r"A-Za-z0-9\-._~"
_SUB_DELIMS = r"!$&'()*+,;="
_PCT = r"%[0-9A-Fa-f]{2}"
_PCHAR = rf"(?:[{_UNRESERVED}{_SUB_DELIMS}:@]|{_PCT})"
_PCHAR_NC = rf"(?:[{_UNRESERVED}{_SUB_DELIMS}@]|{_PCT})"
_SEGMENT = rf"{_PCHAR}*"
_USERINFO = rf"(?:[{_UNRESERVED}{_SUB_DELIMS}:]|{_PCT})*"
_REG_NAME = rf"(?:[{_UNRESERVED}{_SUB_DELIMS}]|{_PCT})*"
_AUTHORITY = rf"(?:{_USERINFO}@)?{_REG_NAME}(?::[0-9]*)?"
_PATH_ABEMPTY = rf"(?:/{_SEGMENT})*"
_PATH_ABSOLUTE = rf"/(?:{_PCHAR}+(?:/{_SEGMENT})*)?"
_PATH_ROOTLESS = rf"{_PCHAR}+(?:/{_SEGMENT})*"
_PATH_NOSCHEME = rf"{_PCHAR_NC}+(?:/{_SEGMENT})*"
_QUERY = rf"(?:{_PCHAR}|[/?])*"
_TAIL = rf"(?:\?{_QUERY})?(?:#{_QUERY})?"
_SCHEME = r"[A-Za-z][A-Za-z0-9+.\-]*"
URI = rf"{_SCHEME}:(?://{_AUTHORITY}{_PATH_ABEMPTY}|{_PATH_ABSOLUTE}|{_PATH_ROOTLESS}|){_TAIL}"
_RELATIVE = rf"(?://{_AUTHORITY}{_PATH_ABEMPTY}|{_PATH_ABSOLUTE}|{_PATH_NOSCHEME}|){_TAIL}"
URI_REFERENCE = rf"(?:{URI}|{_RELATIVE})"
JSON_POINTER = r"(?:/(?:[^~/]|~[01])*)*"
# jsonschema's checker rejects any digit that follows a 0 (so 100 fails): stay inside that.
RELATIVE_JSON_POINTER = rf"(?:0|[1-9]+0?)(?:#|{JSON_POINTER})"
_N = r"[0-9]+"
_DURATION_TIME = rf"T(?:{_N}H(?:{_N}M)?(?:{_N}S)?|{_N}M(?:{_N}S)?|{_N}S)"
_DURATION_DATE = rf"(?:{_N}Y(?:{_N}M)?(?:{_N}D)?|{_N}M(?:{_N}D)?|{_N}D)"
DURATION = rf"P(?:{_N}W|{_DURATION_DATE}(?:{_DURATION_TIME})?|{_DURATION_TIME})"

_PLAIN: dict[str, str] = {
    "date": DATE,
    "time": TIME,
    "date-time": DATE_TIME,
    "uuid": UUID,
    "ipv4": IPV4,
    "ipv6": IPV6,
    "email": EMAIL,
    "idn-email": EMAIL,
    "uri": URI,
    "iri": URI,
    "uri-reference": URI_REFERENCE,
    "iri-reference": URI_REFERENCE,
    "json-pointer": JSON_POINTER,
    "relative-json-pointer": RELATIVE_JSON_POINTER,
    "duration": DURATION,
}


def _hostname() -> ra.Node:
    shape = regex_to_node(_HOSTNAME_SHAPE)
    # at most 253 characters, plus an optional final dot
    limit = ra.seq(ra.repeat(ra.chars([(0, ra.MAX_CODE_POINT)]), 1, 253), ra.opt(ra.lit(".")))
    return ra.constrained(shape, require=[limit], terminator="")


_BUILDERS: dict[str, Callable[[], ra.Node]] = {"hostname": _hostname}
_CACHE: dict[str, ra.Node] = {}

SUPPORTED_FORMATS = frozenset(_PLAIN) | frozenset(_BUILDERS)


# Formats each draft defines (as ``jsonschema`` checks them with all its optional format
# dependencies installed). Fixed here so a schema means the same on every machine: jsonschema
# registers a checker only when its optional dependency imports, which would otherwise turn an
# unsupported format into a silent annotation on a machine that lacks, say, ``uri-template``.
_DRAFT4 = frozenset({"date-time", "email", "hostname", "idn-email", "ipv4", "ipv6", "regex", "uri"})
_DRAFT6 = _DRAFT4 | {"json-pointer", "uri-reference", "uri-template"}
_DRAFT7 = _DRAFT6 | {"date", "idn-hostname", "iri", "iri-reference", "relative-json-pointer",
                     "time"}
_DRAFT2019 = _DRAFT7 | {"duration", "uuid"}
DRAFT_FORMATS: dict[str, frozenset[str]] = {
    "Draft4Validator": _DRAFT4,
    "Draft6Validator": _DRAFT6,
    "Draft7Validator": _DRAFT7,
    "Draft201909Validator": _DRAFT2019,
    "Draft202012Validator": _DRAFT2019,
}


def format_node(name: str) -> ra.Node:
    """Decoded-string regex of a supported format (KeyError for others)."""
    node = _CACHE.get(name)
    if node is None:
        node = _BUILDERS[name]() if name in _BUILDERS else regex_to_node(_PLAIN[name])
        _CACHE[name] = node
    return node
