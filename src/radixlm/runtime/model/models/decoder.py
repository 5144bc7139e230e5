"""The pre-norm decoder stack every served family shares, over the paged KV pool.

Llama, Qwen2 (qkv bias) and Mistral run it as is; a family with different attention details
(Qwen3's QK-norm, Phi-3's partial rotary) subclasses :class:`DecoderAttention` and names it in
its :class:`DecoderForCausalLM` subclass, in its own file; one with a different block or
embedding (Gemma 3's sandwich norms, scaled embedding) also subclasses :class:`DecoderLayer`
and overrides the model's :meth:`~DecoderForCausalLM.embed` / ``final_norm`` /
``finish_logits`` hooks. Config fields shared by several families (softmax scale, per-layer
windows and RoPE tables, the MLP's activation) are read here.

Weights load from Hugging Face names (``weight_names.py``); q/k/v and gate/up projections are
fused into one matmul each. Token rows of all requests in a step are concatenated
(``[num_tokens, hidden]``) and attention reads each request's KV through its slot indices.

Submodules are run through ``.forward`` rather than ``module(...)``: ``nn.Module.__call__``
costs ~1 us of hook bookkeeping per call, seven calls per layer, and a CPU decode step of a
small model is bound by such per-call overhead outside its GEMMs. No hooks are used on these
modules (a hook registered on one would not run).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from ....kernels import KernelOps, rotary_rows
from ....kernels.reference.silu_mul import gelu_tanh_mul_ref, silu_mul_ref
from ...memory.kv_pool import KVPool, widened_kv
from ..forward_batch import ForwardBatch
from ..model_config import ModelConfig, UnsupportedModelError
from .rope import RopeTables
from .weight_names import fused_shards, map_name, param_pieces

if TYPE_CHECKING:  # native_decode imports this module
    from .native_decode import NativeDecodeStep

logger = logging.getLogger(__name__)


class DecoderAttention(nn.Module):
    """Rotary GQA attention with a fused QKV projection; subclasses change how the query and
    key heads are formed (:meth:`_qk_heads`)."""

    def __init__(self, cfg: ModelConfig, layer_id: int, ops: KernelOps, rope: RopeTables) -> None:
        super().__init__()
        self.ops = ops
        self.layer_id = layer_id
        self.num_heads = cfg.num_heads
        self.num_kv_heads = cfg.num_kv_heads
        self.head_dim = cfg.head_dim
        self.q_size = cfg.num_heads * cfg.head_dim
        self.kv_size = cfg.num_kv_heads * cfg.head_dim
        self.sm_scale = cfg.attention_scale
        self.rotary_dim = cfg.rotary_dim  # < head_dim: only the first rotary_dim rotate
        self.sliding_window = cfg.sliding_windows[layer_id]
        self.rope = rope.for_layer(self.sliding_window)
        self.qkv_proj = nn.Linear(
            cfg.hidden_size, self.q_size + 2 * self.kv_size, bias=cfg.qkv_bias
        )
        self.o_proj = nn.Linear(self.q_size, cfg.hidden_size, bias=cfg.o_bias)

    def forward(self, x: torch.Tensor, batch: ForwardBatch, pool: KVPool) -> torch.Tensor:
        ops = self.ops
        t = x.shape[0]
        qkv = self.qkv_proj.forward(x)  # [T, (Hq + 2 Hkv) * D]
        q, k = self._rotated_qk(qkv, batch)
        # a view of the projection's rows: the store reads them in place
        v = qkv[:, self.q_size + self.kv_size:].reshape(t, self.num_kv_heads, self.head_dim)
        k_cache, v_cache = pool.k_buffers[self.layer_id], pool.v_buffers[self.layer_id]
        if k_cache.dtype != k.dtype:  # narrower than q's with --kv-cache-dtype bfloat16
            k, v = k.to(k_cache.dtype), v.to(k_cache.dtype)
        # k and v as they are (strided token rows: a slice of the rotated heads or of the
        # projection): every set's store reads rows through their strides
        ops.store_kv(k_cache, v_cache, batch.out_cache_loc, k, v)
        out = self._attend(q.contiguous(), k_cache, v_cache, batch)  # [T, Hq, D]
        return self.o_proj.forward(out.reshape(t, self.q_size))

    def _qk_heads(self, qkv: torch.Tensor) -> torch.Tensor:
        """The query then key heads ``[T, Hq + Hkv, D]`` about to be rotated (here a view of
        the fused projection's q and k rows)."""
        t = qkv.shape[0]
        return qkv[:, :self.q_size + self.kv_size].view(
            t, self.num_heads + self.num_kv_heads, self.head_dim)

    def _rotated_qk(
        self, qkv: torch.Tensor, batch: ForwardBatch
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotated ``(q [T, Hq, D], k [T, Hkv, D])`` from the fused projection ``qkv``."""
        qk = self._qk_heads(qkv)
        if self.rotary_dim == self.head_dim:
            return self._rotate(qk, batch)
        # Partial rotary (Phi-3 ``partial_rotary_factor``): the first rotary_dim dims of each
        # head rotate among themselves (rotate_half over rotary_dim); the rest pass through.
        r, hq = self.rotary_dim, self.num_heads
        q, k = self._rotate(qk[..., :r].contiguous(), batch)
        return torch.cat((q, qk[:, :hq, r:]), -1), torch.cat((k, qk[:, hq:, r:]), -1)

    def _rotate(
        self, qk: torch.Tensor, batch: ForwardBatch
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``qk`` [T, Hq + Hkv, R] rotated by the tables (width R / 2), split into q and k.

        With a set's ``rotary_rows`` the cos/sin rows are gathered once per forward (cached
        in ``batch.cache``, shared by every layer) and q and k rotate in one pass."""
        hq = self.num_heads
        if self.ops.rotary_rows is None:
            return self.ops.rotary(qk[:, :hq], qk[:, hq:], batch.positions, self.rope.cos,
                                   self.rope.sin)
        out = self.ops.rotary_rows(qk, *self._rotary_tables(batch, qk.dtype))
        return out[:, :hq], out[:, hq:]

    def _rotary_tables(self, batch: ForwardBatch, dtype: torch.dtype
                       ) -> tuple[torch.Tensor, torch.Tensor]:
        """This layer's ``(cos, sin)`` rows [T, 1, D] at the batch's positions for
        ``rotary_rows``: gathered by the first layer of its table and kept in ``batch.cache``
        for the others."""
        cache, cos, sin = batch.cache, f"{self.rope.key}_cos", f"{self.rope.key}_sin"
        if cos not in cache:
            cache[cos], cache[sin] = rotary_rows(batch.positions, self.rope.cos, self.rope.sin,
                                                 dtype)
        return cache[cos], cache[sin]

    def _attend(
        self,
        q: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        batch: ForwardBatch,
    ) -> torch.Tensor:
        ops = self.ops
        narrow = k_cache.dtype != q.dtype  # a bfloat16 pool: read its rows widened

        def decode(qd: torch.Tensor) -> torch.Tensor:
            k, v, idx = k_cache, v_cache, batch.dec_kv_indices
            plan = None  # the batch's plan addresses pool slots, not the widened rows
            if narrow:
                k, v, idx = widened_kv(k_cache, v_cache, idx, q.dtype)
            else:
                plan = batch.decode_plan(self.sliding_window, ops.plan_decode)
            return ops.decode_attention(qd, k, v, batch.dec_kv_indptr, idx, self.sm_scale,
                                        0.0, self.sliding_window, plan=plan)

        def extend(qe: torch.Tensor) -> torch.Tensor:
            k, v, idx = k_cache, v_cache, batch.ext_kv_indices
            if narrow:
                k, v, idx = widened_kv(k_cache, v_cache, idx, q.dtype)
            return ops.extend_attention(qe, k, v, batch.ext_qo_indptr, batch.ext_kv_indptr,
                                        idx, self.sm_scale, 0.0, self.sliding_window)

        if not batch.has_extend:
            return decode(q)
        if not batch.has_decode:
            return extend(q)
        out = torch.empty_like(q)
        out[batch.ext_rows] = extend(q[batch.ext_rows].contiguous())
        out[batch.dec_rows] = decode(q[batch.dec_rows].contiguous())
        return out


class GatedMLP(nn.Module):
    """``down(act(gate(x)) * up(x))`` with gate and up fused into one projection; ``act`` is
    silu, or tanh-approximated gelu (Gemma's ``gelu_pytorch_tanh``)."""

    def __init__(self, cfg: ModelConfig, ops: KernelOps) -> None:
        super().__init__()
        self.intermediate = cfg.intermediate_size
        # [T, 2 inter] (gate | up) -> [T, inter]
        self.act_mul = ((ops.silu_mul or silu_mul_ref) if cfg.hidden_act == "silu"
                        else ops.gelu_tanh_mul or gelu_tanh_mul_ref)
        self.gate_up_proj = nn.Linear(cfg.hidden_size, 2 * self.intermediate, bias=cfg.mlp_bias)
        self.down_proj = nn.Linear(self.intermediate, cfg.hidden_size, bias=cfg.mlp_bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj.forward(self.act_mul(self.gate_up_proj.forward(x)))


class DecoderLayer(nn.Module):
    """Pre-norm block: RMSNorm, attention, residual add + RMSNorm, gated MLP."""

    def __init__(self, cfg: ModelConfig, layer_id: int, ops: KernelOps, rope: RopeTables,
                 attention: type[DecoderAttention]) -> None:
        super().__init__()
        self.ops = ops
        self.eps = cfg.rms_norm_eps
        self.self_attn = attention(cfg, layer_id, ops, rope)
        self.mlp = GatedMLP(cfg, ops)
        self.input_layernorm = nn.Parameter(torch.empty(cfg.hidden_size))
        self.post_attention_layernorm = nn.Parameter(torch.empty(cfg.hidden_size))

    def forward(self, x: torch.Tensor, residual: torch.Tensor | None, batch: ForwardBatch,
                pool: KVPool) -> tuple[torch.Tensor, torch.Tensor]:
        """``(mlp output, residual stream)``; the residual add of the output is deferred to
        the next layer's input norm (fused there), or the model's final norm."""
        h, residual = self._input_norm(x, residual)
        h = self.self_attn.forward(h, batch, pool)
        h, residual = self._add_norm(h, residual, self.post_attention_layernorm)
        return self.mlp.forward(h), residual

    def _input_norm(self, x: torch.Tensor, residual: torch.Tensor | None
                    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The attention input and the residual stream (``x`` itself in the first layer)."""
        if residual is None:
            return self._norm(x, self.input_layernorm), x
        return self._add_norm(x, residual, self.input_layernorm)

    def _norm(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return self.ops.rms_norm(x, weight, self.eps)

    def _add_norm(self, x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor
                  ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(norm(x + residual), x + residual)``."""
        return self.ops.fused_add_rms_norm(x, residual, weight, self.eps)


class DecoderForCausalLM(nn.Module):
    """Causal LM whose forward takes a :class:`ForwardBatch` and returns selected logits.

    ``ops`` is the kernel set and ``rope`` the rotary tables (built on the target device
    beforehand); both go to every layer at construction. Subclasses set ``attention`` and
    ``layer`` (their attention and block classes) and ``split_checkpoint`` (False where the
    checkpoint already stores the fused ``qkv_proj`` / ``gate_up_proj`` tensors).
    """

    attention: type[DecoderAttention] = DecoderAttention
    layer: type[DecoderLayer] = DecoderLayer
    split_checkpoint = True  # q/k/v and gate/up arrive as separate tensors

    def __init__(self, cfg: ModelConfig, ops: KernelOps, rope: RopeTables) -> None:
        super().__init__()
        self.config = cfg
        self.ops = ops
        # given its (uninitialized) table: nn.Embedding's own normal_ init on the meta device
        # goes through torch._refs, whose first call imports torch._dynamo (5-20 s at load)
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size,
                                         _weight=torch.empty(cfg.vocab_size, cfg.hidden_size))
        self.layers = nn.ModuleList(
            self.layer(cfg, i, ops, rope, self.attention) for i in range(cfg.num_layers)
        )
        self.norm = nn.Parameter(torch.empty(cfg.hidden_size))
        self.lm_head = (
            None if cfg.tie_word_embeddings else nn.Linear(cfg.hidden_size, cfg.vocab_size, False)
        )
        self.head: nn.Module | None = None  # set by replace_linears
        # Tensor parallelism: vocabulary slices -> full logits (parallel/layers.py)
        self.gather_logits: nn.Module | None = None
        # the one-token step as bound native calls (native_decode.py): None until the first
        # forward after the projections are in place, False where the layers do not allow it
        self._native_step: NativeDecodeStep | bool | None = None

    def replace_linears(
        self, build: Callable[[str, torch.Tensor, torch.Tensor | None], nn.Module]
    ) -> None:
        """After load: swap every projection and the LM head for ``build(name, weight, bias)``
        (name ``layers.3.mlp.gate_up_proj`` or ``lm_head``; weight ``[out, in]``). Linears
        put in place by :meth:`attach_modules` stay as they are."""
        for name, owner, attr in self._projections():
            lin = getattr(owner, attr)
            if isinstance(lin, nn.Linear):
                setattr(owner, attr, build(name, lin.weight, lin.bias))
        self._native_step = None
        if self.head is None:
            weight = self.embed_tokens.weight if self.lm_head is None else self.lm_head.weight
            self.head = build("lm_head", weight, None)

    def attach_modules(self, modules: dict[str, nn.Module]) -> None:
        """Before the parameters exist (on the meta device): put ``modules`` (by the names
        :meth:`replace_linears` uses, and ``embed_tokens``) in place of those projections /
        the embedding, so no float weight is ever allocated for them; an untied ``lm_head``
        given here drops its float weight. A tied head must come with a given embedding."""
        for name, owner, attr in self._projections():
            if name in modules:
                setattr(owner, attr, modules[name])
        if "lm_head" in modules:
            self.head = modules["lm_head"]
            self.lm_head = None
        if "embed_tokens" in modules:
            self.embed_tokens = modules["embed_tokens"]
        self._native_step = None

    def _projections(self) -> list[tuple[str, nn.Module, str]]:
        """``(name, owner, attribute)`` of every layer's projections, in model order."""
        return [(f"layers.{i}.{part}.{attr}", owner, attr)
                for i, layer in enumerate(self.layers)
                for owner, part, attr in ((layer.self_attn, "self_attn", "qkv_proj"),
                                          (layer.self_attn, "self_attn", "o_proj"),
                                          (layer.mlp, "mlp", "gate_up_proj"),
                                          (layer.mlp, "mlp", "down_proj"))]

    @torch.inference_mode()
    def forward(self, batch: ForwardBatch, pool: KVPool) -> torch.Tensor:
        """Logits (float32) ``[len(batch.logits_rows), vocab]``."""
        x = self.embed(batch.input_ids)  # [T, hidden]
        step = self._native_step
        if step is None:
            step = self._native_step = self._build_native_step()
        if step and step.takes(batch, pool, x):  # one token: the same calls, bound
            h = step.final_hidden(batch, x)
        else:
            residual: torch.Tensor | None = None
            for layer in self.layers:
                x, residual = layer.forward(x, residual, batch, pool)
            rows = batch.logits_rows
            h = self.final_norm(x[rows].contiguous(), residual[rows].contiguous())
        if self.head is not None:
            logits = self.head(h)
        else:
            weight = self.embed_tokens.weight if self.lm_head is None else self.lm_head.weight
            logits = F.linear(h, weight)
        if self.gather_logits is not None:
            logits = self.gather_logits(logits)
        return self.finish_logits(logits).float()

    def _build_native_step(self) -> NativeDecodeStep | bool:
        """:class:`~.native_decode.NativeDecodeStep` over the layers, or False where it does
        not reproduce them (or the final norm is overridden)."""
        from .native_decode import NativeDecodeStep, supported

        if (type(self).final_norm is not DecoderForCausalLM.final_norm
                or not supported(list(self.layers)) or self.norm.dtype != torch.float32
                or not self.norm.is_contiguous() or self.norm.device.type != "cpu"):
            return False
        return NativeDecodeStep(list(self.layers), self.norm, self.config.rms_norm_eps)

    def embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        """The first layer's input ``[T, hidden]`` for token ids ``[T]``."""
        return self.embed_tokens(input_ids)

    def final_norm(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        """The LM head's input from the last layer's output and residual stream (rows kept)."""
        h, _ = self.ops.fused_add_rms_norm(x, residual, self.norm, self.config.rms_norm_eps)
        return h

    def finish_logits(self, logits: torch.Tensor) -> torch.Tensor:
        """Full-vocabulary logits after the head, in the model's dtype (here unchanged)."""
        return logits

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Copy Hugging Face-named tensors into the fused parameters; every one must arrive."""
        cfg = self.config
        shards = fused_shards(cfg) if self.split_checkpoint else {}
        params = dict(self.named_parameters())
        expected = {name: param_pieces(name, shards) for name in params}
        loaded: dict[str, int] = {}
        for hf_name, tensor in weights:
            target = map_name(hf_name, shards)
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
