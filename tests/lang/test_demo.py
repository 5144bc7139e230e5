"""The demo (``radixlm demo``) is a program of the language: it runs end to end and reports
its records, the cache hit rate and the throughput."""

from __future__ import annotations

import argparse
import re

import pytest

from radixlm.demo import CASES, DOCUMENTS, grade, run_demo


def test_the_demo_runs_and_reports(tiny_llama_path, capsys):
    args = argparse.Namespace(model_path=str(tiny_llama_path), arch="llama", size="test",
                              train_seconds=0.0, seed=0)
    assert run_demo(args) == 0
    out = capsys.readouterr().out
    assert out.count("--- ") == len(DOCUMENTS)
    hit = re.search(r"cache hit rate: (\d+)%", out)
    assert hit and int(hit.group(1)) >= 50, "the shared prefixes must come from the cache"
    assert re.search(r"throughput: [\d.]+ programs/s", out)
    acc = re.search(r"field accuracy (\d+)/(\d+) .*valid JSON (\d+)/(\d+)", out)
    assert acc and int(acc.group(2)) == 4 * len(DOCUMENTS) and int(acc.group(4)) == len(DOCUMENTS)
    assert out.count(" ok") + out.count("WRONG") == 4 * len(DOCUMENTS), "every field graded"


@pytest.mark.parametrize(("record", "expected"), [
    ({"name": "ines", "age": 29, "city": "Oslo", "job": "baker"}, [True] * 4),
    ({"name": "Ines", "age": "29", "city": "Bergen", "job": "baker"}, [True, False, False, True]),
    ({"name": "Ines", "age": 29.0, "city": "Oslo"}, [True, False, True, False]),
    (None, [False] * 4),
])
def test_grading_marks_wrong_fields_wrong(record, expected):
    assert list(grade(record, CASES[0][1]).values()) == expected
