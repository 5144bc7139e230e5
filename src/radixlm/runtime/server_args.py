"""Every engine and server setting, in one frozen dataclass shared by the Engine and the CLI.

Flag names follow SGLang's where they mean the same (``--model-path``, ``--page-size``,
``--max-total-tokens``, ``--chunked-prefill-size``, ``--schedule-policy``,
``--disable-radix-cache``, ...), so an SGLang launch line works unchanged.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import env

SCHEDULE_POLICIES = ("fcfs", "lpm")
WHITESPACE_POLICIES = ("compact", "single", "flexible")


@dataclass(frozen=True)
class ServerArgs:
    """Validated on construction; unknown keyword arguments are refused by name."""

    model_path: str
    tokenizer_path: str | None = None
    dtype: str = field(default="auto", metadata={"help": "auto, float32, bfloat16, float16"})
    device: str = "cpu"
    page_size: int = field(default=1, metadata={"help": "KV page size in tokens"})
    max_total_tokens: int | None = field(default=None, metadata={
        "help": "KV pool capacity in tokens (default: sized by --mem-fraction-static)"})
    mem_fraction_static: float | None = field(default=None, metadata={
        "help": "share of memory for weights + KV pool: of free RAM on CPU (default 0.25), "
                "of GPU memory on CUDA (default 0.85)"})
    chunked_prefill_size: int = field(
        default=512, metadata={"help": "prefill token budget per scheduler step"}
    )
    max_running_requests: int = 256
    max_queued_requests: int = field(
        default=4096, metadata={"help": "requests beyond this are refused (HTTP 503)"}
    )
    context_length: int | None = field(
        default=None, metadata={"help": "override the model's max_position_embeddings (lower)"}
    )
    schedule_policy: str = field(default="lpm", metadata={"help": "fcfs or lpm"})
    lpm_max_wait_steps: int = field(
        default=32, metadata={"help": "lpm: a request passed over this many steps goes first"}
    )
    disable_radix_cache: bool = False
    stream_interval: int = 1
    num_threads: int = field(default_factory=env.num_threads_default)
    kernel_backend: str = field(default_factory=env.kernel_backend)
    cpu_gemm: str = field(default="auto", metadata={
        "help": "CPU matmuls: auto/onednn (weights packed for oneDNN) or torch (F.linear)"})
    random_seed: int = 0
    tp_size: int = field(default=1, metadata={"help": "tensor parallelism (only 1 supported)"})
    # constrained decoding
    disable_jump_forward: bool = False
    grammar_compile_timeout: float = 10.0
    grammar_max_states: int = 200_000
    constrained_json_whitespace: str = field(
        default="single", metadata={"help": "compact, single or flexible"}
    )
    grammar_cache_dir: str | None = None
    reasoning_end_marker: str | None = field(
        default=None, metadata={"help": "e.g. </think>: constraints start after this marker"}
    )
    # HTTP server
    host: str = "127.0.0.1"
    port: int = 30000
    api_key: str | None = None
    max_request_bytes: int = 8 * 1024 * 1024
    enable_cors: bool = False
    served_model_name: str | None = None
    chat_template: str | None = None
    max_prompt_chars: int = field(default=1_000_000, metadata={
        "help": "longest prompt (characters, after the chat template) a request may send"})
    allow_client_chat_template: bool = field(default=False, metadata={
        "help": "let requests supply their own chat template (chat_template_kwargs)"})
    watchdog_timeout: float = 300.0

    def __post_init__(self) -> None:
        _positive(self, "page_size", "chunked_prefill_size",
                  "max_running_requests", "max_queued_requests", "stream_interval",
                  "num_threads", "lpm_max_wait_steps", "grammar_max_states",
                  "max_request_bytes", "max_prompt_chars")
        if not self.model_path:
            raise ValueError("model_path is required")
        if self.max_total_tokens is not None and self.max_total_tokens < self.page_size:
            raise ValueError(f"max_total_tokens ({self.max_total_tokens}) must hold at least "
                             f"one page ({self.page_size} tokens)")
        _choice(self, "schedule_policy", SCHEDULE_POLICIES)
        _choice(self, "dtype", ("auto", "float32", "bfloat16", "float16"))
        _choice(self, "kernel_backend", ("auto", "torch", "triton"))
        _choice(self, "cpu_gemm", ("auto", "onednn", "torch"))
        _choice(self, "constrained_json_whitespace", WHITESPACE_POLICIES)
        if self.tp_size != 1:
            raise ValueError(f"tp_size must be 1 (tensor parallelism is not implemented), "
                             f"got {self.tp_size}")
        if self.context_length is not None and self.context_length < 2:
            raise ValueError(f"context_length must be >= 2, got {self.context_length}")
        if not 0 <= self.port < 65536:
            raise ValueError(f"port must be in [0, 65535], got {self.port}")
        if self.mem_fraction_static is not None and not 0 < self.mem_fraction_static <= 1:
            raise ValueError(f"mem_fraction_static must be in (0, 1], got "
                             f"{self.mem_fraction_static}")
        if self.grammar_compile_timeout <= 0:
            raise ValueError("grammar_compile_timeout must be positive")

    @property
    def resolved_tokenizer_path(self) -> str:
        return self.tokenizer_path or self.model_path

    def with_local_checkpoint(self) -> ServerArgs:
        """These args with a GGUF ``model_path`` (or ``tokenizer_path``) replaced by its cached
        Hugging Face conversion (converting it the first time); unchanged otherwise."""
        from .model.gguf_conversion import resolve_model_path

        tokenizer = (None if self.tokenizer_path is None
                     else str(resolve_model_path(self.tokenizer_path)))
        model = str(resolve_model_path(self.model_path, need_tokenizer=tokenizer is None))
        return dataclasses.replace(self, model_path=model, tokenizer_path=tokenizer,
                                   served_model_name=self.model_name)

    @property
    def model_name(self) -> str:
        return self.served_model_name or Path(self.model_path).name

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> ServerArgs:
        """Build from keyword arguments, naming any that are unknown."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(kwargs) - names)
        if unknown:
            raise TypeError(f"unknown server argument(s) {unknown}; known: {sorted(names)}")
        return cls(**kwargs)

    @classmethod
    def add_cli_args(cls, parser: argparse.ArgumentParser) -> None:
        """Add one ``--flag-name`` per field (SGLang spelling), typed from the defaults."""
        for f in dataclasses.fields(cls):
            flag = "--" + f.name.replace("_", "-")
            help_text = f.metadata.get("help")
            if f.name == "model_path":
                parser.add_argument(flag, required=True,
                                    help="Hugging Face model folder, or a .gguf file")
            elif f.type in ("bool",):
                parser.add_argument(flag, action="store_true", help=help_text)
            else:
                parser.add_argument(flag, type=_cli_type(f.type), default=None, help=help_text)

    @classmethod
    def from_cli_args(cls, args: argparse.Namespace) -> ServerArgs:
        values = {f.name: getattr(args, f.name) for f in dataclasses.fields(cls)
                  if getattr(args, f.name, None) is not None}
        return cls(**values)


def _cli_type(annotation: str) -> type:
    if "int" in annotation:
        return int
    if "float" in annotation:
        return float
    return str


def _positive(args: ServerArgs, *names: str) -> None:
    for name in names:
        value = getattr(args, name)
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")


def _choice(args: ServerArgs, name: str, allowed: tuple[str, ...]) -> None:
    if getattr(args, name) not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, got {getattr(args, name)!r}")
