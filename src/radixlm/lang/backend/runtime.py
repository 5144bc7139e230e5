"""``Runtime``: start a radixlm HTTP server as a child process and talk to it.

``Runtime(model_path=..., **server_args)`` picks a free port, launches
``python -m radixlm.launch_server`` in its own process group, polls ``/health_generate``
until the model answers (or ``launch_timeout`` passes), and exposes ``.endpoint`` (a
:class:`RuntimeEndpoint`), so a Runtime can be passed to ``set_default_backend``.
``shutdown()`` (also at exit) stops the server and its worker processes.
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import requests

from .runtime_endpoint import RuntimeEndpoint

POLL_INTERVAL_S = 0.5


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _cli_flags(server_args: dict[str, Any]) -> list[str]:
    flags: list[str] = []
    for name, value in server_args.items():
        flag = "--" + name.replace("_", "-")
        if value is True:
            flags.append(flag)
        elif value is not None and value is not False:
            flags += [flag, str(value)]
    return flags


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class Runtime:
    """A server child process plus its endpoint; use as a context manager or call
    :meth:`shutdown`."""

    def __init__(self, model_path: str | os.PathLike | None = None, *,
                 log_level: str = "error", launch_timeout: float = 300.0,
                 host: str = "127.0.0.1", port: int | None = None, api_key: str | None = None,
                 chat_template_name: str | None = None, **server_args: Any) -> None:
        if model_path is None:
            raise TypeError("Runtime needs model_path (a Hugging Face model folder)")
        self.model_path = str(model_path)
        self.host = host
        self.port = port or _free_port(host)
        self.url = f"http://{host}:{self.port}"
        self.generate_url = self.url + "/generate"
        self.api_key = api_key
        cmd = [sys.executable, "-m", "radixlm.launch_server", "--model-path", self.model_path,
               "--host", host, "--port", str(self.port),
               *_cli_flags({"api_key": api_key, **server_args})]
        self.log_path = Path(tempfile.mkstemp(prefix="radixlm-runtime-", suffix=".log")[1])
        env = {**os.environ, "RADIXLM_LOG_LEVEL": log_level.upper()}
        with open(self.log_path, "wb") as log:
            self._proc: subprocess.Popen | None = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self.pid = self._proc.pid
        atexit.register(self.shutdown)
        try:
            self._wait_ready(launch_timeout)
            self.endpoint = RuntimeEndpoint(self.url, api_key=api_key,
                                            chat_template_name=chat_template_name)
        except BaseException:
            self.shutdown()
            raise

    def _log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def _wait_ready(self, timeout: float) -> None:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"the radixlm server exited with code {self._proc.returncode} "
                                   f"while starting; its log ({self.log_path}) ends with:\n"
                                   f"{self._log_tail()}")
            try:
                res = requests.get(self.url + "/health_generate", headers=headers, timeout=30)
                if res.status_code == 200:
                    return
            except requests.exceptions.RequestException:
                pass
            time.sleep(POLL_INTERVAL_S)
        raise TimeoutError(f"the radixlm server did not become ready within {timeout} s; its "
                           f"log ({self.log_path}) ends with:\n{self._log_tail()}")

    def shutdown(self) -> None:
        """Stop the server and its children (idempotent)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        atexit.unregister(self.shutdown)
        _signal_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10.0)
        except subprocess.TimeoutExpired:
            pass
        # Whatever is left of the group (the server's workers) goes too.
        _signal_group(proc.pid, signal.SIGKILL)
        proc.wait(5.0)
        self.pid = None

    # -- conveniences (SGLang's Runtime has them) -----------------------------------------

    def cache_prefix(self, prefix: str) -> None:
        self.endpoint.cache_prefix(prefix)

    def get_tokenizer(self) -> Any:
        from transformers import AutoTokenizer

        from ...runtime.model.gguf_conversion import resolve_model_path

        return AutoTokenizer.from_pretrained(resolve_model_path(self.model_path))

    def get_server_info(self) -> dict[str, Any]:
        return self.endpoint.get_server_info()

    def flush_cache(self) -> bool:
        return self.endpoint.flush_cache()

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
