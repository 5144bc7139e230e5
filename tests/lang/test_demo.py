"""The demo (``radixlm demo``) is a program of the language: it runs end to end and reports
its records, the cache hit rate and the throughput."""

from __future__ import annotations

import argparse
import re

from radixlm.demo import DOCUMENTS, run_demo


def test_the_demo_runs_and_reports(tiny_llama_path, capsys):
    args = argparse.Namespace(model_path=str(tiny_llama_path), arch="llama", size="test",
                              train_seconds=0.0, seed=0)
    assert run_demo(args) == 0
    out = capsys.readouterr().out
    assert out.count("--- ") == len(DOCUMENTS)
    hit = re.search(r"cache hit rate: (\d+)%", out)
    assert hit and int(hit.group(1)) >= 50, "the shared prefixes must come from the cache"
    assert re.search(r"throughput: [\d.]+ programs/s", out)
