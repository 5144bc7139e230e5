"""Command-line flags from a frozen dataclass config: one ``--flag-name`` per field.

Shared by ``radixlm serve`` (:class:`~radixlm.runtime.server_args.ServerArgs`, SGLang's
spelling) and ``radixlm router`` (:class:`~radixlm.router.router_args.RouterArgs`,
sgl-router's). A flag left out parses as None and is not passed on, so the dataclass default
applies; the dataclass's own validation judges what was given.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

T = TypeVar("T")


def flag_of(name: str) -> str:
    """``max_tree_size`` -> ``--max-tree-size``."""
    return "--" + name.replace("_", "-")


def type_of(annotation: str) -> type:
    """The parser type of a field annotation (a string: the configs use postponed
    annotations): int, float, else str."""
    if "int" in annotation:
        return int
    if "float" in annotation:
        return float
    return str


def add_field_flags(parser: argparse.ArgumentParser, cls: type,
                    overrides: Mapping[str, Mapping[str, Any]] | None = None) -> None:
    """Add a flag per field of ``cls`` in field order: booleans switch on, the rest are typed
    from the annotation; ``overrides`` replaces ``add_argument`` keywords for named fields."""
    for f in dataclasses.fields(cls):
        kwargs: dict[str, Any] = {"help": f.metadata.get("help")}
        if f.type == "bool":
            kwargs["action"] = "store_true"
        else:
            kwargs.update(type=type_of(str(f.type)), default=None)
        kwargs.update((overrides or {}).get(f.name, {}))
        parser.add_argument(flag_of(f.name), **kwargs)


def given_values(cls: type, ns: argparse.Namespace) -> dict[str, Any]:
    """The fields of ``cls`` that the command line set."""
    return {f.name: getattr(ns, f.name) for f in dataclasses.fields(cls)
            if getattr(ns, f.name, None) is not None}


def build_or_exit(parser: argparse.ArgumentParser, build: Callable[[argparse.Namespace], T],
                  ns: argparse.Namespace) -> T:
    """``build(ns)``; a config the dataclass refuses exits through ``parser.error`` (usage,
    the message, status 2) instead of a traceback."""
    try:
        return build(ns)
    except (TypeError, ValueError) as exc:
        parser.error(str(exc))  # exits
