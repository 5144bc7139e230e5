"""The Llama family (Llama, Qwen2 with qkv bias, Mistral) over the paged KV pool.

Weights load from Hugging Face names; q/k/v and gate/up projections are fused into one matmul
each. Token rows of all requests in a step are concatenated (``[num_tokens, hidden]``) and
attention reads each request's KV through its slot indices.

Submodules are run through ``.forward`` rather than ``module(...)``: ``nn.Module.__call__``
costs ~1 us of hook bookkeeping per call, seven calls per layer, and a CPU decode step of a
small model is bound by such per-call overhead outside its GEMMs. No hooks are used on these
modules (a hook registered on one would not run).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

import torch
import torch.nn.functional as F
from torch import nn

from ....kernels import KernelOps, rotary_rows
from ....kernels.reference.silu_mul import silu_mul_ref
from ...memory.kv_pool import KVPool
from ..forward_batch import ForwardBatch
from ..model_config import ModelConfig, UnsupportedModelError
from .rope import RopeTables

logger = logging.getLogger(__name__)


class LlamaAttention(nn.Module):
    def __init__(self, cfg: ModelConfig, layer_id: int, ops: KernelOps, rope: RopeTables) -> None:
        super().__init__()
        self.ops = ops
        self.rope = rope
        self.layer_id = layer_id
        self.num_heads = cfg.num_heads
        self.num_kv_heads = cfg.num_kv_heads
        self.head_dim = cfg.head_dim
        self.q_size = cfg.num_heads * cfg.head_dim
        self.kv_size = cfg.num_kv_heads * cfg.head_dim
        self.sm_scale = cfg.head_dim**-0.5
        self.sliding_window = cfg.sliding_windows[layer_id]
        self.qkv_proj = nn.Linear(
            cfg.hidden_size, self.q_size + 2 * self.kv_size, bias=cfg.qkv_bias
        )
        self.o_proj = nn.Linear(self.q_size, cfg.hidden_size, bias=cfg.o_bias)

    def forward(self, x: torch.Tensor, batch: ForwardBatch, pool: KVPool) -> torch.Tensor:
        ops = self.ops
        t = x.shape[0]
        qkv = self.qkv_proj.forward(x)  # [T, (Hq + 2 Hkv) * D]
        q, k = self._rotated_qk(qkv, batch)
        v = qkv[:, self.q_size + self.kv_size:].reshape(t, self.num_kv_heads, self.head_dim)
        v = v.contiguous()
        k_cache, v_cache = pool.k_buffers[self.layer_id], pool.v_buffers[self.layer_id]
        ops.store_kv(k_cache, v_cache, batch.out_cache_loc, k.contiguous(), v)
        out = self._attend(q.contiguous(), k_cache, v_cache, batch)  # [T, Hq, D]
        return self.o_proj.forward(out.reshape(t, self.q_size))

    def _rotated_qk(
        self, qkv: torch.Tensor, batch: ForwardBatch
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotated ``(q [T, Hq, D], k [T, Hkv, D])`` from the fused projection ``qkv``.

        With a set's ``rotary_rows`` the cos/sin rows are gathered once per forward (cached
        in ``batch.cache``, shared by every layer) and q and k rotate in one pass."""
        t, d, hq = qkv.shape[0], self.head_dim, self.num_heads
        if self.ops.rotary_rows is None:
            q = qkv[:, :self.q_size].view(t, hq, d)
            k = qkv[:, self.q_size:self.q_size + self.kv_size].view(t, self.num_kv_heads, d)
            return self.ops.rotary(q, k, batch.positions, self.rope.cos, self.rope.sin)
        cache = batch.cache
        if "rope_cos" not in cache:
            cache["rope_cos"], cache["rope_sin"] = rotary_rows(
                batch.positions, self.rope.cos, self.rope.sin, qkv.dtype)
        qk = qkv[:, :self.q_size + self.kv_size].view(t, hq + self.num_kv_heads, d)
        out = self.ops.rotary_rows(qk, cache["rope_cos"], cache["rope_sin"])
        return out[:, :hq], out[:, hq:]

    def _attend(
        self,
        q: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        batch: ForwardBatch,
    ) -> torch.Tensor:
        ops = self.ops

        def decode(qd: torch.Tensor) -> torch.Tensor:
            return ops.decode_attention(
                qd, k_cache, v_cache, batch.dec_kv_indptr, batch.dec_kv_indices,
                self.sm_scale, 0.0, self.sliding_window,
                plan=batch.decode_plan(self.sliding_window, ops.plan_decode),
            )

        def extend(qe: torch.Tensor) -> torch.Tensor:
            return ops.extend_attention(
                qe, k_cache, v_cache, batch.ext_qo_indptr, batch.ext_kv_indptr,
                batch.ext_kv_indices, self.sm_scale, 0.0, self.sliding_window,
            )

        if not batch.has_extend:
            return decode(q)
        if not batch.has_decode:
            return extend(q)
        out = torch.empty_like(q)
        out[batch.ext_rows] = extend(q[batch.ext_rows].contiguous())
        out[batch.dec_rows] = decode(q[batch.dec_rows].contiguous())
        return out


class LlamaMLP(nn.Module):
    def __init__(self, cfg: ModelConfig, ops: KernelOps) -> None:
        super().__init__()
        self.intermediate = cfg.intermediate_size
        self.silu_mul = ops.silu_mul or silu_mul_ref  # [T, 2 inter] (gate | up) -> [T, inter]
        self.gate_up_proj = nn.Linear(cfg.hidden_size, 2 * self.intermediate, bias=cfg.mlp_bias)
        self.down_proj = nn.Linear(self.intermediate, cfg.hidden_size, bias=cfg.mlp_bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj.forward(self.silu_mul(self.gate_up_proj.forward(x)))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig, layer_id: int, ops: KernelOps, rope: RopeTables) -> None:
        super().__init__()
        self.ops = ops
        self.eps = cfg.rms_norm_eps
        self.self_attn = LlamaAttention(cfg, layer_id, ops, rope)
        self.mlp = LlamaMLP(cfg, ops)
        self.input_layernorm = nn.Parameter(torch.empty(cfg.hidden_size))
        self.post_attention_layernorm = nn.Parameter(torch.empty(cfg.hidden_size))

    def forward(
        self,
        x: torch.Tensor,
        residual: torch.Tensor | None,
        batch: ForwardBatch,
        pool: KVPool,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        ops = self.ops
        if residual is None:
            residual = x
            h = ops.rms_norm(x, self.input_layernorm, self.eps)
        else:
            h, residual = ops.fused_add_rms_norm(x, residual, self.input_layernorm, self.eps)
        h = self.self_attn.forward(h, batch, pool)
        h, residual = ops.fused_add_rms_norm(h, residual, self.post_attention_layernorm, self.eps)
        return self.mlp.forward(h), residual


class LlamaForCausalLM(nn.Module):
    """Causal LM whose forward takes a :class:`ForwardBatch` and returns selected logits.

    ``ops`` is the kernel set and ``rope`` the rotary tables (built on the target device
    beforehand); both go to every layer at construction.
    """

    def __init__(self, cfg: ModelConfig, ops: KernelOps, rope: RopeTables) -> None:
        super().__init__()
        self.config = cfg
        self.ops = ops
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(
            LlamaDecoderLayer(cfg, i, ops, rope) for i in range(cfg.num_layers)
        )
        self.norm = nn.Parameter(torch.empty(cfg.hidden_size))
        self.lm_head = (
            None if cfg.tie_word_embeddings else nn.Linear(cfg.hidden_size, cfg.vocab_size, False)
        )
        self.head: nn.Module | None = None  # set by replace_linears
        # Tensor parallelism: vocabulary slices -> full logits (parallel/layers.py)
        self.gather_logits: nn.Module | None = None

    def replace_linears(
        self, build: Callable[[str, torch.Tensor, torch.Tensor | None], nn.Module]
    ) -> None:
        """After load: swap every projection and the LM head for ``build(name, weight, bias)``
        (name ``layers.3.mlp.gate_up_proj`` or ``lm_head``; weight ``[out, in]``)."""
        for i, layer in enumerate(self.layers):
            for owner, part, attr in ((layer.self_attn, "self_attn", "qkv_proj"),
                                      (layer.self_attn, "self_attn", "o_proj"),
                                      (layer.mlp, "mlp", "gate_up_proj"),
                                      (layer.mlp, "mlp", "down_proj")):
                lin = getattr(owner, attr)
                setattr(owner, attr, build(f"layers.{i}.{part}.{attr}", lin.weight, lin.bias))
        weight = self.embed_tokens.weight if self.lm_head is None else self.lm_head.weight
        self.head = build("lm_head", weight, None)

    @torch.inference_mode()
    def forward(self, batch: ForwardBatch, pool: KVPool) -> torch.Tensor:
        """Logits (float32) ``[len(batch.logits_rows), vocab]``."""
        x = self.embed_tokens(batch.input_ids)  # [T, hidden]
        residual: torch.Tensor | None = None
        for layer in self.layers:
            x, residual = layer.forward(x, residual, batch, pool)
        rows = batch.logits_rows
        h, _ = self.ops.fused_add_rms_norm(
            x[rows].contiguous(), residual[rows].contiguous(), self.norm, self.config.rms_norm_eps
        )
        if self.head is not None:
            logits = self.head(h)
        else:
            weight = self.embed_tokens.weight if self.lm_head is None else self.lm_head.weight
            logits = F.linear(h, weight)
        if self.gather_logits is not None:
            logits = self.gather_logits(logits)
        return logits.float()

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Copy Hugging Face-named tensors into the fused parameters; every one must arrive."""
        cfg = self.config
        q, kv, inter = cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim, \
            cfg.intermediate_size
        shards = {
            "q_proj": ("qkv_proj", 0, q), "k_proj": ("qkv_proj", q, kv),
            "v_proj": ("qkv_proj", q + kv, kv), "gate_proj": ("gate_up_proj", 0, inter),
            "up_proj": ("gate_up_proj", inter, inter),
        }
        params = dict(self.named_parameters())
        expected = {name: _param_pieces(name, shards) for name in params}
        loaded: dict[str, int] = {}
        for hf_name, tensor in weights:
            target = _map_name(hf_name, shards)
            if target is None:
                continue
            name, start, size = target
            if name not in params:
                if name == "lm_head.weight" and cfg.tie_word_embeddings:
                    continue
                logger.warning("ignoring unexpected checkpoint tensor %s", hf_name)
                continue
            dst = params[name].data
            view = dst if size is None else dst.narrow(0, start, size)
            if view.shape != tensor.shape:
                raise UnsupportedModelError(
                    f"tensor {hf_name}: expected shape {tuple(view.shape)}, "
                    f"got {tuple(tensor.shape)}"
                )
            view.copy_(tensor)
            loaded[name] = loaded.get(name, 0) + 1
        missing = [n for n, pieces in expected.items() if loaded.get(n, 0) < pieces]
        if missing:
            raise UnsupportedModelError(f"checkpoint is missing tensors for {missing[:8]}")


def _param_pieces(name: str, shards: dict[str, tuple[str, int, int]]) -> int:
    """How many checkpoint tensors fill parameter ``name`` (fused ones take several)."""
    for fused in ("qkv_proj", "gate_up_proj"):
        if f".{fused}." in name:
            return sum(1 for target, _, _ in shards.values() if target == fused)
    return 1


def _map_name(
    hf_name: str, shards: dict[str, tuple[str, int, int]]
) -> tuple[str, int, int | None] | None:
    """HF tensor name -> (our parameter, row offset, rows) or None to skip."""
    if "rotary_emb" in hf_name:
        return None
    name = hf_name.removeprefix("model.")
    if name in ("norm.weight",):
        return "norm", 0, None
    if name.endswith(("input_layernorm.weight", "post_attention_layernorm.weight")):
        return name.removesuffix(".weight"), 0, None
    for shard, (fused, start, size) in shards.items():
        marker = f".{shard}."
        if marker in name:
            return name.replace(marker, f".{fused}."), start, size
    return name, 0, None
