"""A user's process resolves a converted GGUF (``Engine``'s first step) without torch, the
grammar package or the kernels: those load in the scheduler, which runs the model."""

from __future__ import annotations

import json
import subprocess
import sys

from test_gguf_checkpoint import write_gguf

from radixlm.runtime.model.gguf_conversion import default_cache_root, ensure_converted

HEAVY = ("torch", "jsonschema", "radixlm.fsm", "radixlm.kernels", "transformers")


def test_resolving_a_cached_gguf_imports_nothing_heavy(tmp_path, monkeypatch, tiny_llama_path):
    monkeypatch.setenv("RADIXLM_CACHE_DIR", str(tmp_path / "cache"))
    path = write_gguf(tmp_path / "m.gguf", tokenizer=False)  # the tokenizer: a folder's
    folder = ensure_converted(path, default_cache_root(), need_tokenizer=False)
    code = ("import json, sys\n"
            "import radixlm.runtime.api.engine\n"
            "from radixlm.runtime.server_args import ServerArgs\n"
            f"args = ServerArgs(model_path={str(path)!r}, "
            f"tokenizer_path={str(tiny_llama_path)!r}).with_local_checkpoint()\n"
            f"print(json.dumps([args.model_path, [m for m in {HEAVY!r} if m in sys.modules]]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    model_path, heavy = json.loads(done.stdout.strip().splitlines()[-1])
    assert model_path == str(folder) and heavy == []
