"""One Prometheus exposition from several workers' ``/metrics`` plus the router's own.

Each worker's samples get a ``worker="<url>"`` label; samples are grouped under one
``# HELP``/``# TYPE`` header per metric family (the exposition format allows a family once),
in the order families first appear.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def _family_of(sample_name: str, families: Mapping[str, object]) -> str:
    """The family a sample belongs to: its own name if that has a header (prometheus_client
    gives ``x_created`` its own gauge family), else the name less a known suffix."""
    if sample_name in families:
        return sample_name
    for suffix in ("_bucket", "_count", "_sum", "_total", "_created"):
        if sample_name.endswith(suffix) and sample_name[: -len(suffix)] in families:
            return sample_name[: -len(suffix)]
    return sample_name


def _with_label(line: str, label: str) -> str:
    """``name{a="1"} 2`` -> ``name{<label>,a="1"} 2``; ``name 2`` -> ``name{<label>} 2``."""
    cut = min(i for i in (line.find("{"), line.find(" "), len(line)) if i >= 0)
    if line[cut:cut + 1] == "{":
        sep = "" if line[cut + 1:cut + 2] == "}" else ","
        return f"{line[:cut + 1]}{label}{sep}{line[cut + 1:]}"
    return f"{line[:cut]}{{{label}}}{line[cut:]}"


def merge_metrics(texts: Mapping[str, str], own: Sequence[tuple[str, str, str, list[str]]]
                  ) -> str:
    """``texts``: worker url -> its exposition text. ``own``: the router's families as
    ``(name, type, help, sample lines)``."""
    headers: dict[str, list[str]] = {}
    samples: dict[str, list[str]] = {}
    for name, kind, help_text, lines in own:
        headers[name] = [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        samples[name] = list(lines)
    for url, text in texts.items():
        label = f'worker="{url}"'
        for line in text.splitlines():
            if line.startswith("# HELP ") or line.startswith("# TYPE "):
                name = line.split(" ", 3)[2]
                headers.setdefault(name, [])
                samples.setdefault(name, [])
                if len(headers[name]) < 2 and line not in headers[name]:
                    headers[name].append(line)
            elif line and not line.startswith("#"):
                sample = line.split("{", 1)[0].split(" ", 1)[0]
                family = _family_of(sample, headers)
                samples.setdefault(family, []).append(_with_label(line, label))
                headers.setdefault(family, [])
    out: list[str] = []
    for name, lines in samples.items():
        out += headers.get(name, []) + lines
    return "\n".join(out) + "\n"
