"""Side-by-side bar charts of benchmark figures (the PNGs of docs/img/).

A chart is a small dict (one entry of a figures JSON file, or built by a benchmark's
``--chart PATH``)::

    {"file": "cpu_speed_spr.png", "title": "...", "processor": "...", "date": "...",
     "style": "panels" | "grouped", "log": false,
     "groups": ["prefill", "decode batch 1"], "units": ["tok/s", "tok/s"],
     "series": [{"name": "radixlm f32", "values": [1237, 28.2]}, ...],
     "note": "...", "command": "..."}

``panels`` draws one panel per group with its own y scale (groups with different units or
magnitudes); ``grouped`` draws every group on one axis (one unit, ``log`` for wide ranges). A
value ``null`` is a figure that was not measured: no bar, "n/a" in its place.

:func:`chart_spec` turns a chart into plain numbers and strings (no matplotlib: tested in CI,
which does not install the ``bench`` extra); :func:`draw` renders a spec with matplotlib.

    python benchmarks/charts.py docs/img/figures.json --out docs/img   # every chart in it
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any

STYLES = ("panels", "grouped")
# radixlm's series in blues, every alternative in warm colors, each in series order, so a
# reader tells ours from theirs at a glance in every chart
OURS = ("#08519c", "#3182bd", "#6baed6", "#9ecae1", "#c6dbef")
THEIRS = ("#e6550d", "#fdae6b", "#31a354", "#756bb1")


@dataclass(frozen=True)
class Bar:
    """One bar: its series, value (None: not measured), label above it and color."""

    series: str
    value: float | None
    label: str
    color: str


@dataclass(frozen=True)
class Panel:
    """One axis: its title, y-axis label, bars in series order and whether y is logarithmic."""

    title: str
    ylabel: str
    bars: tuple[Bar, ...]
    log: bool


@dataclass(frozen=True)
class ChartSpec:
    """Everything :func:`draw` needs: the heading lines, the panels and the legend."""

    title: str
    subtitle: str
    style: str
    panels: tuple[Panel, ...]
    legend: tuple[tuple[str, str], ...]  # (series name, color)
    note: str


def series_colors(names: list[str]) -> list[str]:
    """A color per series: blues for names starting with "radixlm", warm colors for others."""
    ours = [n for n in names if n.startswith("radixlm")]
    if len(ours) > len(OURS) or len(names) - len(ours) > len(THEIRS):
        raise ValueError(f"at most {len(OURS)} radixlm and {len(THEIRS)} other series")
    mine, other = iter(OURS), iter(THEIRS)
    return [next(mine) if n.startswith("radixlm") else next(other) for n in names]


def value_label(value: float | None) -> str:
    """The figure as the docs' tables write it: whole from 100 up (thousands separated),
    one decimal from 1, else 3 significant digits."""
    if value is None:
        return "n/a"
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.1f}" if value >= 1 else f"{value:.3g}"


def chart_spec(chart: dict[str, Any]) -> ChartSpec:
    """Check a chart dict and lay it out as panels of bars (pure Python)."""
    style = chart.get("style", "panels")
    if style not in STYLES:
        raise ValueError(f"style must be one of {STYLES}, got {style!r}")
    groups: list[str] = list(chart["groups"])
    series: list[dict[str, Any]] = list(chart["series"])
    if not groups or not series:
        raise ValueError("a chart needs at least one group and one series")
    colors = series_colors([s["name"] for s in series])
    units = list(chart.get("units") or [chart.get("unit", "")] * len(groups))
    if len(units) != len(groups):
        raise ValueError(f"{len(units)} units for {len(groups)} groups")
    for s in series:
        if len(s["values"]) != len(groups):
            raise ValueError(f"series {s['name']!r} has {len(s['values'])} values for "
                             f"{len(groups)} groups")
        for v in s["values"]:
            if v is not None and not (isinstance(v, int | float) and math.isfinite(v)
                                      and v >= 0):
                raise ValueError(f"series {s['name']!r}: {v!r} is not a figure >= 0")
    log = bool(chart.get("log", False))
    if log and any(v == 0 for s in series for v in s["values"]):
        raise ValueError("a log axis cannot show a zero")
    legend = tuple((s["name"], colors[i]) for i, s in enumerate(series))

    def bars(g: int) -> tuple[Bar, ...]:
        return tuple(Bar(s["name"], s["values"][g], value_label(s["values"][g]), colors[i])
                     for i, s in enumerate(series))

    if style == "panels":
        panels = tuple(Panel(groups[g], units[g], bars(g), log) for g in range(len(groups)))
    else:
        if len(set(units)) != 1:
            raise ValueError("a grouped chart has one unit; use style 'panels' for several")
        panels = (Panel("", units[0], tuple(b for g in range(len(groups)) for b in bars(g)),
                        log),)
    heading = " · ".join(p for p in (chart.get("processor"), chart.get("date")) if p)
    return ChartSpec(chart["title"], heading, style, panels, legend, chart.get("note", ""))


def group_names(chart: dict[str, Any]) -> list[str]:
    """The x tick labels of a grouped chart, one per group."""
    return list(chart["groups"])


def processor_name() -> str:
    """This machine's processor as /proc/cpuinfo names it (for a chart measured here)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def draw(chart: dict[str, Any], path: Path) -> Path:
    """Render ``chart`` to the PNG ``path`` (needs matplotlib: the ``bench`` extra)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    spec = chart_spec(chart)
    n = len(spec.panels)
    width = max(4.0 * n, 7.0) if spec.style == "panels" else max(1.1 * len(chart["groups"])
                                                                 * len(spec.legend) / 2, 9.0)
    fig, axes = plt.subplots(1, n, figsize=(min(width, 16.0), 4.6), squeeze=False)
    for ax, panel in zip(axes[0], spec.panels, strict=True):
        _draw_panel(ax, panel, spec, chart)
    fig.suptitle(spec.title, fontsize=13, fontweight="bold", y=0.99)
    fig.text(0.5, 0.915, spec.subtitle, ha="center", fontsize=10)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for _, c in spec.legend]
    rows = math.ceil(len(spec.legend) / 4)
    foot = 0.05 if spec.note else 0.01  # the note's line under the legend
    fig.legend(handles, [name for name, _ in spec.legend], loc="lower center",
               bbox_to_anchor=(0.5, foot), ncol=min(len(spec.legend), 4), fontsize=9,
               frameon=False)
    if spec.note:
        fig.text(0.5, 0.015, spec.note, ha="center", fontsize=8, style="italic")
    fig.tight_layout(rect=(0, foot + 0.06 * rows, 1, 0.9))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _draw_panel(ax: Any, panel: Panel, spec: ChartSpec, chart: dict[str, Any]) -> None:
    per_group = len(spec.legend)
    width = 0.8 / per_group
    positions = [(i // per_group) + (i % per_group - (per_group - 1) / 2) * width
                 for i in range(len(panel.bars))]
    shown = [v for v in (b.value for b in panel.bars) if v is not None]
    top = max(shown, default=1.0)
    for x, bar in zip(positions, panel.bars, strict=True):
        if bar.value is None:
            ax.text(x, top * (0.02 if not panel.log else 1.0), "n/a", ha="center",
                    va="bottom", fontsize=7, rotation=90, color="grey")
            continue
        ax.bar(x, bar.value, width=width * 0.95, color=bar.color)
        ax.text(x, bar.value, bar.label, ha="center", va="bottom", fontsize=7,
                rotation=90 if per_group > 3 or spec.style == "grouped" else 0)
    if panel.log:
        ax.set_yscale("log")
        ax.set_ylim(top=top * 12)
    else:
        ax.set_ylim(0, top * 1.3)
    ax.set_xlim(-0.5, len(panel.bars) // per_group - 0.5)
    if spec.style == "panels":
        ax.set_xticks([])
        ax.set_title(panel.title, fontsize=11)
    else:
        ax.set_xticks(range(len(chart["groups"])))
        ax.set_xticklabels(group_names(chart), fontsize=8)
    ax.set_ylabel(panel.ylabel, fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)


def chart_json_path(png: Path) -> Path:
    """Where a chart's dict is kept beside its PNG (not PATH.json: a results file may be it)."""
    return png.with_name(png.stem + ".chart.json")


def write_chart(chart: dict[str, Any], path: Path) -> Path | None:
    """A benchmark's ``--chart PATH``: the PNG, and the chart dict beside it as PATH's stem +
    ``.chart.json`` (so it can be redrawn or added to a figures file); without matplotlib only
    the JSON, said once."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    spec_path = chart_json_path(path)
    spec_path.write_text(json.dumps(chart, indent=1) + "\n")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print(f"chart: matplotlib is not installed (pip install -e '.[bench]'); wrote "
              f"{spec_path} only")
        return None
    return draw(chart, path)


def utc_now() -> str:
    """Now, as the charts' headings date a run."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def cpu_speed_charts(results: dict[str, Any], processor: str, date: str,
                     command: str = "") -> list[dict[str, Any]]:
    """benchmarks/cpu_speed.py's results as charts: the speed rows (prefill, decode batch 1
    and 32) and, where the run had them, the many-requests rows (RAG, 32 streams)."""
    rows = [(name[len("radixlm_"):], figs) for name, figs in results.items()
            if name.startswith("radixlm_") and isinstance(figs, dict)]
    named = [(f"radixlm {mode}", figs) for mode, figs in rows]
    named.append(("transformers float32", results.get("transformers_f32") or {}))
    llama = results.get("llama_cpp_q4_1")
    if isinstance(llama, dict):  # else a line saying why it was skipped
        named.append(("llama.cpp Q4_1", llama))
    speed_keys = ("prefill_tok_s", "decode_b1_tok_s", "decode_b32_tok_s")
    heading = {"processor": processor, "date": date, "style": "panels", "command": command}
    charts = [{"title": "Speed on one machine, side by side (higher is better)", **heading,
               "groups": ["prefill", "decode, batch 1", "decode, batch 32"],
               "units": ["tokens/s"] * 3,
               "series": [{"name": n, "values": [f.get(k) for k in speed_keys]}
                          for n, f in named if any(f.get(k) is not None for k in speed_keys)]}]
    many = [(n, [_dig(f, "rag_batch", "total_s"), _dig(f, "streams32", "total_tok_s"),
                 f.get("rag_one_by_one_s")]) for n, f in named]
    many = [(n, v) for n, v in many if any(x is not None for x in v)]
    if many:
        charts.append({"title": "Many requests, side by side", **heading,
                       "groups": ["RAG: all questions at once", "streams at once",
                                  "RAG: one question at a time"],
                       "units": ["seconds (lower is better)",
                                 "total tokens/s (higher is better)",
                                 "seconds (lower is better)"],
                       "series": [{"name": n, "values": v} for n, v in many]})
    return charts


def _dig(figs: dict[str, Any], key: str, field: str) -> float | None:
    inner = figs.get(key)
    return inner.get(field) if isinstance(inner, dict) else None


def json_decoding_charts(summary: dict[str, dict[str, dict[str, Any]]], vocabulary: str,
                         processor: str, date: str, command: str = "") -> list[dict[str, Any]]:
    """benchmarks/json_decoding.py's summary (subset -> engine -> figures) as two grouped
    charts: mask p50 and p99 per token (log scale), and compile p50 per schema."""
    subsets = list(summary)
    engines = list(dict.fromkeys(e for per in summary.values() for e in per))
    engines.sort(key=lambda e: not e.startswith("radixlm"))  # ours first, in blue

    def values(engine: str, key: str) -> list[float | None]:
        return [summary[s].get(engine, {}).get(key) for s in subsets]

    heading = {"processor": processor, "date": date, "style": "grouped", "command": command,
               "groups": subsets}
    masks = [{"name": f"{e} mask {q}", "values": values(e, f"mask_us_{q}")}
             for e in engines for q in ("p50", "p99")]
    return [{"title": f"Token-mask time on the {vocabulary} vocabulary (lower is better)",
             **heading, "log": True, "unit": "microseconds per token (log scale)",
             "series": [m for m in masks if any(v for v in m["values"])]},
            {"title": f"Grammar compile time on the {vocabulary} vocabulary, p50 "
                      "(lower is better)", **heading, "unit": "milliseconds per schema",
             "series": [{"name": f"{e} compile p50", "values": values(e, "compile_ms_p50")}
                        for e in engines]}]


def write_charts(charts: list[dict[str, Any]], path: Path) -> None:
    """A benchmark's ``--chart PATH``: the first chart at PATH, the others beside it as
    PATH's stem + _2, _3, ... (each with its JSON, see :func:`write_chart`)."""
    path = Path(path)
    for i, chart in enumerate(charts):
        target = path if i == 0 else path.with_name(f"{path.stem}_{i + 1}{path.suffix}")
        chart = {**chart, "file": target.name}
        written = write_chart(chart, target)
        print(f"chart: wrote {written or chart_json_path(target)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("figures", type=Path, help="a JSON file: {\"charts\": [chart, ...]}")
    parser.add_argument("--out", type=Path, default=None,
                        help="folder for the PNGs (default: the figures file's folder)")
    args = parser.parse_args()
    out = args.out or args.figures.parent
    for chart in json.loads(args.figures.read_text())["charts"]:
        print(f"wrote {draw(chart, out / chart['file'])}")


if __name__ == "__main__":
    main()
