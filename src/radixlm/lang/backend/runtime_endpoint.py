"""``RuntimeEndpoint``: a backend over the native HTTP API of a radixlm or SGLang server.

Routes used: ``GET /get_model_info`` (or ``/model_info``) on construction,
``POST /generate`` (plain, batched, streaming as SSE, prefill-only, ``input_ids``),
``POST /flush_cache``, ``GET /get_server_info`` (or ``/server_info``), ``POST /abort_request``.
The API key travels as a bearer token. When the model folder the server reports exists on
this machine, its tokenizer is loaded here (lazily) for the model's chat template and for
single-request select scoring.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import requests

from ..chat_template import resolve_chat_template
from .native import NativeBackend

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 10.0
_UNSET = object()


class RuntimeEndpointError(RuntimeError):
    """The server answered a request with an error; the message carries the server's."""

    def __init__(self, method: str, path: str, status: int, message: str) -> None:
        super().__init__(f"{method} {path} failed with HTTP {status}: {message}")
        self.status = status


class RuntimeEndpoint(NativeBackend):
    """``RuntimeEndpoint("http://127.0.0.1:30000", api_key=None)``; also works against a real
    SGLang server (same contract)."""

    def __init__(self, base_url: str, api_key: str | None = None, verify: Any = None,
                 chat_template_name: str | None = None, timeout: float | None = None) -> None:
        super().__init__()
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ValueError(f"RuntimeEndpoint: base_url must be an http(s) URL, got "
                             f"{base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.verify = verify
        self.timeout = timeout
        self._local = threading.local()
        self._lock = threading.Lock()
        self._tokenizer: Any = _UNSET
        self._chat_template_name = chat_template_name
        self.chat_template = None
        self.model_info: dict[str, Any] = self._get_json("/get_model_info", "/model_info")

    # -- HTTP -----------------------------------------------------------------------------

    def _session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = requests.Session()
            if self.api_key:
                session.headers["Authorization"] = f"Bearer {self.api_key}"
            self._local.session = session
        return session

    def _request(self, method: str, path: str, body: Any = None, stream: bool = False,
                 ok_statuses: tuple[int, ...] = (200,)) -> requests.Response:
        url = self.base_url + path
        try:
            res = self._session().request(method, url, json=body, stream=stream,
                                          verify=self.verify,
                                          timeout=(CONNECT_TIMEOUT_S, self.timeout))
        except requests.exceptions.ConnectionError as exc:
            raise ConnectionError(
                f"cannot reach the server at {self.base_url} ({method} {path}): "
                f"{_reason(exc)}. Is it running? Start one with `radixlm serve --model-path "
                f"DIR --port PORT` or use radixlm.Runtime(model_path=...)") from None
        except requests.exceptions.Timeout:
            raise TimeoutError(f"{method} {url} timed out after {self.timeout} s") from None
        if res.status_code not in ok_statuses:
            raise RuntimeEndpointError(method, path, res.status_code, _error_text(res))
        return res

    def _get_json(self, path: str, alt_path: str) -> Any:
        # Upstream is renaming /get_X to /X; a compatible client tries both.
        try:
            return self._request("GET", path).json()
        except RuntimeEndpointError as exc:
            if exc.status != 404:
                raise
            return self._request("GET", alt_path).json()

    def send(self, body: dict[str, Any]) -> Any:
        return self._request("POST", "/generate", body).json()

    def send_stream(self, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        res = self._request("POST", "/generate", body, stream=True)
        try:
            for line in res.iter_lines():
                if not line.startswith(b"data:"):
                    continue
                data = line[5:].strip()
                if data == b"[DONE]":
                    return
                chunk = json.loads(data)
                if "text" not in chunk and "error" in chunk:
                    raise RuntimeEndpointError("POST", "/generate", 200,
                                               json.dumps(chunk["error"]))
                yield chunk
        finally:
            res.close()  # closing the connection aborts the request on the server

    # -- backend API ----------------------------------------------------------------------

    def get_model_name(self) -> str:
        return str(self.model_info.get("model_path", "unknown"))

    def select_tokenizer(self) -> Any:
        with self._lock:
            if self._tokenizer is _UNSET:
                path = self.model_info.get("tokenizer_path") or self.model_info.get(
                    "model_path", "")
                self._tokenizer = _load_local_tokenizer(str(path))
            return self._tokenizer

    def get_chat_template(self) -> Any:
        if self.chat_template is None:
            tok = None if self._chat_template_name else self.select_tokenizer()
            self.chat_template = resolve_chat_template(self.get_model_name(), tok,
                                                       self._chat_template_name)
        return self.chat_template

    def encode_image(self, expr: Any) -> str:
        if type(expr).__name__ == "SglVideo":
            raise ValueError("video(): RuntimeEndpoint does not encode videos")
        try:
            return base64.b64encode(Path(expr.path).read_bytes()).decode()
        except OSError as exc:
            raise ValueError(f"image(): cannot read {expr.path!r}: {exc}") from None

    def flush_cache(self) -> bool:
        """True if flushed; False if the server refused (requests in flight)."""
        return self._request("POST", "/flush_cache", ok_statuses=(200, 400)).status_code == 200

    def get_server_info(self) -> dict[str, Any]:
        return self._get_json("/get_server_info", "/server_info")

    def abort(self, rids: list[str]) -> None:
        for rid in rids:
            try:
                self._request("POST", "/abort_request", {"rid": rid})
            except (ConnectionError, RuntimeEndpointError) as exc:
                logger.debug("abort of %s failed: %s", rid, exc)


def _reason(exc: Exception) -> str:
    text = str(exc)
    for marker in ("Connection refused", "Name or service not known", "timed out",
                   "No route to host"):
        if marker in text:
            return marker.lower()
    return text


def _error_text(res: requests.Response) -> str:
    try:
        body = res.json()
    except ValueError:
        return res.text.strip()[:500]
    if isinstance(body, dict):
        for key in ("error", "message", "detail"):
            if key in body:
                value = body[key]
                if isinstance(value, dict):
                    value = value.get("message", value)
                return str(value)
    return json.dumps(body)[:500]


def _load_local_tokenizer(path: str) -> Any:
    """The tokenizer in folder ``path`` if it exists here, else None (no download)."""
    if not path or not Path(path).is_dir():
        return None
    try:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(path, local_files_only=True)
    except Exception as exc:  # noqa: BLE001 - any failure means "not available here"
        logger.info("no local tokenizer at %s (%s); select uses server-side token ids",
                    path, exc)
        return None
