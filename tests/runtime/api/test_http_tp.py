"""``radixlm serve --tp-size 2`` over HTTP: the same greedy tokens as the TP=1 server."""

from __future__ import annotations

import requests

PROMPTS = ["The capital of France is", "Question: What is 3 plus 4?\nAnswer:"]
GREEDY = {"max_new_tokens": 8, "temperature": 0.0, "ignore_eos": True}


def generate(url: str) -> list[list[int]]:
    body = {"text": PROMPTS, "sampling_params": GREEDY}
    out = requests.post(url + "/generate", json=body, timeout=120).json()
    return [o["output_ids"] for o in out]


def test_tp2_server_gives_tp1_greedy_tokens(start_server, tiny_llama_path, tiny_server_url):
    tp2 = start_server("--model-path", str(tiny_llama_path), "--tp-size", "2",
                       "--max-total-tokens", "1024")
    assert generate(tp2) == generate(tiny_server_url)
    info = requests.get(tp2 + "/get_server_info", timeout=30).json()
    assert info["tp_size"] == 2 and "tp-worker-1" in info["process_ids"]
