"""The detokenizer's process keeps torch out: its tokenizer loads, decodes the same text and
imports no torch; a process that has transformers already is left alone."""

from __future__ import annotations

import json
import subprocess
import sys

from radixlm.runtime.torch_block import block_torch

IDS = [[1, 2, 3, 40, 41, 42], list(range(5, 60)), [0, 7, 7, 7]]

CHILD = """
import json, sys
from radixlm.runtime.torch_block import block_torch
from radixlm.runtime.load_memory import load_tokenizer
blocked = block_torch()
tok = load_tokenizer(sys.argv[1])
texts = [tok.decode(ids, skip_special_tokens=skip) for ids in json.loads(sys.argv[2])
         for skip in (True, False)]
print(json.dumps({"blocked": blocked, "torch": sys.modules.get("torch", 0) is not None,
                  "class": type(tok).__name__, "texts": texts}))
"""


def test_a_blocked_process_decodes_the_same_text_without_torch(tiny_llama_path):
    from transformers import AutoTokenizer

    done = subprocess.run([sys.executable, "-c", CHILD, str(tiny_llama_path), json.dumps(IDS)],
                          capture_output=True, text=True, check=True)
    child = json.loads(done.stdout.strip().splitlines()[-1])
    assert child["blocked"] is True and child["torch"] is False
    assert "PyTorch was not found" not in done.stderr  # transformers' advice is expected here
    tok = AutoTokenizer.from_pretrained(tiny_llama_path)
    assert child["class"] == type(tok).__name__
    assert child["texts"] == [tok.decode(ids, skip_special_tokens=skip) for ids in IDS
                              for skip in (True, False)]


def test_a_process_with_transformers_is_left_alone():
    import transformers  # noqa: F401 - this process decided about torch already

    torch_before = sys.modules.get("torch", "absent")
    assert block_torch() is False
    assert sys.modules.get("torch", "absent") is torch_before
