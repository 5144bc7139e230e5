"""benchmarks/charts.py: figures -> chart specs (pure Python, no matplotlib), the headline
benchmarks' results as charts, and the committed figures file behind docs/img/*.png."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load():  # noqa: ANN202
    spec = importlib.util.spec_from_file_location("charts", ROOT / "benchmarks" / "charts.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


charts = _load()


def _chart(**over):  # noqa: ANN202
    base = {"title": "T", "processor": "CPU X", "date": "2026-12-06", "style": "panels",
            "groups": ["prefill", "decode"], "units": ["tok/s", "tok/s"],
            "series": [{"name": "radixlm f32", "values": [10.0, 2.5]},
                       {"name": "llama.cpp", "values": [5.0, None]}]}
    return {**base, **over}


def test_panels_have_one_bar_per_series_in_series_order_with_the_tables_labels():
    spec = charts.chart_spec(_chart())
    assert [p.title for p in spec.panels] == ["prefill", "decode"]
    assert [p.ylabel for p in spec.panels] == ["tok/s", "tok/s"]
    assert [(b.series, b.value, b.label) for b in spec.panels[1].bars] == [
        ("radixlm f32", 2.5, "2.5"), ("llama.cpp", None, "n/a")]
    assert spec.subtitle == "CPU X · 2026-12-06"


def test_grouped_chart_is_one_axis_with_every_groups_bars_in_turn():
    spec = charts.chart_spec(_chart(style="grouped", units=None, unit="us", log=True,
                                    series=[{"name": "radixlm", "values": [1.0, 2.0]},
                                            {"name": "xgrammar", "values": [3.0, 4.0]}]))
    (panel,) = spec.panels
    assert panel.log and panel.ylabel == "us"
    assert [(b.series, b.value) for b in panel.bars] == [
        ("radixlm", 1.0), ("xgrammar", 3.0), ("radixlm", 2.0), ("xgrammar", 4.0)]


def test_ours_are_blue_and_theirs_warm_whatever_the_order():
    colors = charts.series_colors(["transformers", "radixlm a", "llama.cpp", "radixlm b"])
    assert colors[1] in charts.OURS and colors[3] in charts.OURS
    assert colors[0] in charts.THEIRS and colors[2] in charts.THEIRS
    assert len(set(colors)) == 4


@pytest.mark.parametrize("value, label", [(1237.4, "1,237"), (28.2, "28.2"), (8.0, "8.0"),
                                          (0.375, "0.375"), (None, "n/a")])
def test_value_labels_read_as_the_docs_tables(value, label):
    assert charts.value_label(value) == label


@pytest.mark.parametrize("over, message", [
    ({"style": "pie"}, "style"),
    ({"series": [{"name": "radixlm", "values": [1.0]}]}, "1 values for 2 groups"),
    ({"units": ["tok/s"]}, "1 units for 2 groups"),
    ({"series": [{"name": "radixlm", "values": [1.0, -2.0]}]}, "not a figure"),
    ({"series": [{"name": "radixlm", "values": [1.0, float("nan")]}]}, "not a figure"),
    ({"style": "grouped", "units": ["a", "b"]}, "one unit"),
    ({"log": True, "series": [{"name": "radixlm", "values": [0, 1.0]}]}, "zero"),
])
def test_a_malformed_chart_is_refused_by_name(over, message):
    with pytest.raises(ValueError, match=message):
        charts.chart_spec(_chart(**over))


def test_cpu_speed_results_become_a_speed_chart_and_a_many_requests_chart():
    results = {
        "threads": 1,
        "transformers_f32": {"prefill_tok_s": 420.0, "decode_b1_tok_s": 17.7,
                             "decode_b32_tok_s": 184.0},
        "radixlm_float32": {"prefill_tok_s": 1237.0, "decode_b1_tok_s": 28.2,
                            "decode_b32_tok_s": 513.0, "rag_batch": {"total_s": 7.02},
                            "streams32": {"total_tok_s": 384.0}, "rag_one_by_one_s": 14.2},
        "llama_cpp_q4_1": {"prefill_tok_s": 168.0, "decode_b1_tok_s": 54.3,
                           "rag_batch": {"total_s": 29.27}},
    }
    speed, many = charts.cpu_speed_charts(results, "CPU X", "now")
    assert [s["name"] for s in speed["series"]] == [
        "radixlm float32", "transformers float32", "llama.cpp Q4_1"]
    assert speed["series"][2]["values"] == [168.0, 54.3, None]
    assert {s["name"]: s["values"] for s in many["series"]} == {
        "radixlm float32": [7.02, 384.0, 14.2], "llama.cpp Q4_1": [29.27, None, None]}
    for chart in (speed, many):
        charts.chart_spec(chart)


def test_cpu_speed_without_llama_cpp_or_tasks_gives_the_speed_chart_alone():
    results = {"transformers_f32": {"prefill_tok_s": 1.0, "decode_b1_tok_s": 1.0,
                                    "decode_b32_tok_s": 1.0},
               "radixlm_int8:torch": {"prefill_tok_s": 2.0, "decode_b1_tok_s": 2.0,
                                      "decode_b32_tok_s": 2.0},
               "llama_cpp_q4_1": "skipped: llama-cpp-python is not installed"}
    (speed,) = charts.cpu_speed_charts(results, "CPU X", "now")
    assert [s["name"] for s in speed["series"]] == ["radixlm int8:torch",
                                                    "transformers float32"]


def test_json_decoding_summary_becomes_mask_and_compile_charts_radixlm_first():
    summary = {sub: {"xgrammar": {"mask_us_p50": 3.3, "mask_us_p99": 15.6,
                                  "compile_ms_p50": 6.3},
                     "radixlm": {"mask_us_p50": 2.8, "mask_us_p99": 90.5,
                                 "compile_ms_p50": 5.5}}
               for sub in ("Github_medium", "Github_hard")}
    masks, compiles = charts.json_decoding_charts(summary, "smollm2", "CPU X", "now")
    assert masks["groups"] == ["Github_medium", "Github_hard"] and masks["log"]
    assert [s["name"] for s in masks["series"]] == [
        "radixlm mask p50", "radixlm mask p99", "xgrammar mask p50", "xgrammar mask p99"]
    assert compiles["series"][0] == {"name": "radixlm compile p50", "values": [5.5, 5.5]}
    for chart in (masks, compiles):
        charts.chart_spec(chart)


def test_the_committed_figures_file_lays_out_and_names_each_png_and_processor():
    figures = json.loads((ROOT / "docs" / "img" / "figures.json").read_text())["charts"]
    for chart in figures:
        spec = charts.chart_spec(chart)
        assert chart["processor"] in spec.subtitle and chart["command"]
        assert (ROOT / "docs" / "img" / chart["file"]).is_file()


def test_drawing_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib is a bench extra; CI does not "
                        "install it, so only the pure-Python layout is tested there")
    path = charts.draw(_chart(), tmp_path / "c.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
