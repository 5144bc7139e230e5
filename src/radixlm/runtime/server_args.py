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
from ..dataclass_cli import add_field_flags, given_values

SCHEDULE_POLICIES = ("fcfs", "lpm")
WHITESPACE_POLICIES = ("compact", "single", "flexible")
LOAD_BALANCE_METHODS = ("cache_aware", "round_robin", "shortest_queue")
SPECULATIVE_ALGORITHMS = ("NGRAM",)
# SGLang's --kv-cache-dtype spellings this runtime stores (auto: the model's dtype)
KV_CACHE_DTYPES = ("auto", "float32", "bfloat16", "bf16")
DEFAULT_MAX_RUNNING_REQUESTS = 256  # the scheduler's cap when --max-running-requests is not given


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
    max_running_requests: int | None = field(default=None, metadata={
        "help": f"requests decoding at once (default {DEFAULT_MAX_RUNNING_REQUESTS}); also the "
                "full-context sequences the KV pool is sized for (default on CPU: 8)"})
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
        "help": "CPU matmuls: auto (fastest of F.linear / oneDNN-packed / a quantized kernel "
                "per shape and row count, measured at load), onednn or torch (one fixed "
                "choice), quantized (the weight-only kernel wherever a linear has one: "
                "numerics independent of timings)"})
    quantization: str | None = field(default=None, metadata={
        "help": "CPU weight-only quantization: int8 (per output channel), int4 (groups of "
                "--quantization-group-size), gguf (a GGUF's Q4_0/Q4_1/Q5_0/Q8_0/Q4_K/Q5_K/Q6_K "
                "weights on their own bits, read from the file's memory map; other types "
                "dequantized), none (float at --dtype; a GGUF dequantized). Default: gguf for "
                "a GGUF model on one CPU process, else none"})
    kv_cache_dtype: str = field(default="auto", metadata={
        "help": "KV pool element type: auto (the model's --dtype), float32, bfloat16 (or bf16: "
                "half a float32 pool; attention reads it in float32)"})
    quantization_group_size: int = field(default=32, metadata={
        "help": "int4 group size along the input dimension: 32, 64 or 128"})
    random_seed: int = 0
    # scale-out (docs/scale_out.md)
    tp_size: int = field(default=1, metadata={"help": "tensor-parallel ranks (processes)"})
    nnodes: int = field(default=1, metadata={"help": "nodes the TP ranks span"})
    node_rank: int = field(default=0, metadata={
        "help": "this node's index; node 0 serves, the others run TP workers only"})
    dist_init_addr: str | None = field(default=None, metadata={
        "help": "host:port of node 0's rendezvous (required with --nnodes > 1)"})
    dp_size: int = field(default=1, metadata={
        "help": "data-parallel engine replicas behind one API, routed by --load-balance-method"})
    load_balance_method: str = field(default="cache_aware", metadata={
        "help": "DP routing: cache_aware, round_robin or shortest_queue"})
    cache_threshold: float = field(default=0.5, metadata={
        "help": "cache_aware: least-loaded replica below this prefix-match ratio"})
    balance_abs_threshold: int = field(default=32, metadata={
        "help": "cache_aware: route to least loaded when max - min in-flight exceeds this"})
    # constrained decoding
    disable_jump_forward: bool = False
    grammar_compile_timeout: float = 10.0
    grammar_max_states: int = 200_000
    grammar_mask_wait_ms: float = field(default=0.0, metadata={
        "help": "longest a decode step waits for token masks (or deferred grammar advances) "
                "not ready yet (all requests together); a request whose mask is still not "
                "ready sits that step out and rejoins when it is (same tokens). 0 (default): "
                "never wait, so a step's grammar time is its checks and copies alone; higher: "
                "fewer skipped steps for requests on hard schemas, every step of the batch "
                "possibly that much longer"})
    grammar_advance_inline: bool = field(default=False, metadata={
        "help": "make every sampled token's grammar advance (accept, end check, jump-forward "
                "plan) on the scheduler's thread, even one that builds automaton rows; by "
                "default such an advance is made on the grammar compiler's worker and the "
                "request sits steps out until it is ready (same tokens either way)"})
    constrained_json_whitespace: str = field(
        default="single", metadata={"help": "compact, single or flexible"}
    )
    grammar_cache_dir: str | None = None
    disable_gc_freeze: bool = field(default=False, metadata={
        "help": "keep Python's garbage collector defaults in the scheduler; by default it "
                "collects once after start-up, freezes what survives (model, tokenizer, "
                "vocabulary) out of later scans and collects young objects 20000 allocations "
                "apart, not 700, so collections (which stop every thread) are rare and short"})
    reasoning_end_marker: str | None = field(
        default=None, metadata={"help": "e.g. </think>: constraints start after this marker"}
    )
    ebnf_max_recursion_depth: int = field(
        default=0, metadata={"help": "nesting allowed in recursive ebnf rules (0: refuse them)"}
    )
    tool_call_parser: str | None = field(
        default=None, metadata={"help": "hermes, qwen, qwen25 or llama3 (default: from the "
                                        "chat template)"}
    )
    reasoning_parser: str | None = field(
        default=None, metadata={"help": "qwen3, deepseek-r1 or think: reasoning_content"}
    )
    # speculative decoding without a draft model (runtime/speculative/)
    speculative_algorithm: str | None = field(default=None, metadata={
        "help": "NGRAM: each decoding request proposes draft tokens (prompt lookup in its own "
                "prompt and output; the text its constraint forces, instead of jump-forward) "
                "and the model checks them in one forward; same output as without (greedy: "
                "the same tokens; sampling: the same distribution). Off by default"})
    speculative_num_draft_tokens: int = field(default=6, metadata={
        "help": "most draft tokens a request checks per step"})
    speculative_ngram_min_match_window_size: int = field(default=1, metadata={
        "help": "NGRAM: shortest suffix (tokens) that prompt lookup matches"})
    speculative_ngram_max_match_window_size: int = field(default=4, metadata={
        "help": "NGRAM: longest suffix (tokens) that prompt lookup matches (the longest match "
                "wins)"})
    # SmolLM2's RAG with 8 questions lost on a quiet Zen 4 core at caps of 8, 4 and 1 alike
    # (0.84x, 0.78x, 0.83x, the same 3.5 tokens a verify): the loss is not drafting in steps of
    # several requests, so the cap stays where the first measurement put it
    speculative_max_batch_size: int = field(default=8, metadata={
        "help": "speculate only in steps with at most this many requests taking a token "
                "(above it the forward is compute-bound and drafts cost more than they save)"})
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
        _choice(self, "kernel_backend", ("auto", "torch", "native", "triton"))
        _choice(self, "cpu_gemm", ("auto", "onednn", "torch", "quantized"))
        if self.quantization is not None:
            _choice(self, "quantization", ("int8", "int4", "gguf", "none"))
        _choice(self, "kv_cache_dtype", KV_CACHE_DTYPES)
        _choice(self, "quantization_group_size", (32, 64, 128))
        _choice(self, "constrained_json_whitespace", WHITESPACE_POLICIES)
        _positive(self, "tp_size", "nnodes", "dp_size")
        _validate_scale_out(self)
        if self.context_length is not None and self.context_length < 2:
            raise ValueError(f"context_length must be >= 2, got {self.context_length}")
        if not 0 <= self.port < 65536:
            raise ValueError(f"port must be in [0, 65535], got {self.port}")
        if self.mem_fraction_static is not None and not 0 < self.mem_fraction_static <= 1:
            raise ValueError(f"mem_fraction_static must be in (0, 1], got "
                             f"{self.mem_fraction_static}")
        if not 0 <= self.ebnf_max_recursion_depth <= 64:
            raise ValueError(f"ebnf_max_recursion_depth must be in [0, 64], got "
                             f"{self.ebnf_max_recursion_depth}")
        if self.grammar_compile_timeout <= 0:
            raise ValueError("grammar_compile_timeout must be positive")
        if not 0 <= self.grammar_mask_wait_ms <= 60_000:  # NaN fails too
            raise ValueError(f"grammar_mask_wait_ms must be in [0, 60000] (milliseconds a "
                             f"step may wait for masks), got {self.grammar_mask_wait_ms}")
        _validate_speculative(self)
        if not isinstance(self.grammar_advance_inline, bool):
            raise ValueError(f"grammar_advance_inline must be True or False, got "
                             f"{self.grammar_advance_inline!r}")
        from .agents.reasoning_parser import REASONING_FORMATS
        from .agents.tool_parser import TOOL_PARSERS

        for name, known in (("tool_call_parser", TOOL_PARSERS),
                            ("reasoning_parser", REASONING_FORMATS)):
            if getattr(self, name) is not None:
                _choice(self, name, tuple(sorted(known)))

    @property
    def resolved_max_running_requests(self) -> int:
        """The scheduler's cap on running requests: the one given, else the default."""
        return self.max_running_requests or DEFAULT_MAX_RUNNING_REQUESTS

    @property
    def resolved_quantization(self) -> tuple[str | None, str]:
        """The runner's quantization (None: float weights at ``dtype``) and why, for the
        start-up log: the one given, else a GGUF's own bits (``gguf``) where they run (one
        CPU process), else none."""
        from .model.gguf_conversion import find_gguf, gguf_source

        if self.quantization == "none":
            return None, "--quantization none"
        if self.quantization is not None:
            return self.quantization, f"--quantization {self.quantization}"
        if find_gguf(self.model_path) is None and gguf_source(self.model_path) is None:
            return None, "not a GGUF, no --quantization"
        if self.device != "cpu" or self.tp_size > 1:
            return None, (f"a GGUF, dequantized: its block weights run on one CPU process "
                          f"only (device {self.device}, tp_size {self.tp_size})")
        return "gguf", "a GGUF runs on its own bits by default; --quantization none dequantizes"

    @property
    def resolved_tokenizer_path(self) -> str:
        return self.tokenizer_path or self.model_path

    def with_local_checkpoint(self) -> ServerArgs:
        """These args with a GGUF ``model_path`` (or ``tokenizer_path``) replaced by its cached
        config-and-tokenizer folder (made the first time; the runner maps the weights from the
        GGUF it names); unchanged otherwise."""
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
        """Add one ``--flag-name`` per field (SGLang spelling), typed from the annotations."""
        add_field_flags(parser, cls, {"model_path": {
            "required": True, "help": "Hugging Face model folder, or a .gguf file"}})

    @classmethod
    def from_cli_args(cls, args: argparse.Namespace) -> ServerArgs:
        return cls(**given_values(cls, args))


def _validate_scale_out(args: ServerArgs) -> None:
    if not 0 <= args.node_rank < args.nnodes:
        raise ValueError(f"node_rank must be in [0, nnodes={args.nnodes}), got {args.node_rank}")
    if args.tp_size % args.nnodes:
        raise ValueError(f"tp_size ({args.tp_size}) must be a multiple of nnodes "
                         f"({args.nnodes}): each node runs tp_size / nnodes ranks")
    if args.nnodes > 1 and args.dist_init_addr is None:
        raise ValueError("--nnodes > 1 needs --dist-init-addr host:port (node 0's address, "
                         "the same on every node)")
    if args.dist_init_addr is not None:
        # only here: process_group imports torch, which a user's process need not load
        from .model.parallel.process_group import split_host_port

        split_host_port(args.dist_init_addr)
    if args.dp_size > 1 and args.nnodes > 1:
        raise ValueError("dp_size > 1 with nnodes > 1 is not supported: run one server per "
                         "node and `radixlm router --worker-urls ...` in front")
    _choice(args, "load_balance_method", LOAD_BALANCE_METHODS)
    if not 0 <= args.cache_threshold <= 1:
        raise ValueError(f"cache_threshold must be in [0, 1], got {args.cache_threshold}")
    if args.balance_abs_threshold < 0:
        raise ValueError(f"balance_abs_threshold must be >= 0, got "
                         f"{args.balance_abs_threshold}")


def _validate_speculative(args: ServerArgs) -> None:
    if args.speculative_algorithm is not None:
        _choice(args, "speculative_algorithm", SPECULATIVE_ALGORITHMS)
    _positive(args, "speculative_num_draft_tokens", "speculative_ngram_min_match_window_size",
              "speculative_ngram_max_match_window_size", "speculative_max_batch_size")
    if args.speculative_ngram_min_match_window_size > \
            args.speculative_ngram_max_match_window_size:
        raise ValueError("speculative_ngram_min_match_window_size must be <= "
                         "speculative_ngram_max_match_window_size")


def _positive(args: ServerArgs, *names: str) -> None:
    for name in names:
        value = getattr(args, name)
        if value is not None and value < 1:  # None: a default resolved later
            raise ValueError(f"{name} must be >= 1, got {value}")


def _choice(args: ServerArgs, name: str, allowed: tuple[object, ...]) -> None:
    if getattr(args, name) not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, got {getattr(args, name)!r}")
