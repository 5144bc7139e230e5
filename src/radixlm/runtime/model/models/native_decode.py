"""The shared decoder's decode step (Llama, Qwen2, Mistral) as a fixed list of native calls.

At batch 1 on the CPU a quantized SmolLM2 step spent about a fifth of its time between its
kernels: tensor allocation, slicing, views and argument checks around the ~10 native calls of
each layer (~75 us a layer over 30 layers). :class:`NativeDecodeStep` binds every layer's
calls once, over data pointers of buffers it keeps (``functools.partial`` on the native entry
points), and a step writes only what changes (the embedding row, the rotary rows, the new
slot, the sequence's slots) before running them in order.

The calls are the ones :class:`~.decoder.DecoderLayer` makes on a one-token decode with the
native kernel set (``kernels/cpu/row_ops.py``) and GGUF block projections
(:class:`~..gguf_fused_linear.GGUFFusedLinear`): the same kernels on the same values, so the
logits are bit-identical. The residual stream is summed in place (``add_rms_norm`` reads each
element before it writes it).

A decode batch of up to :data:`MAX_ROWS` one-token rows runs bound too: a speculative verify's
rows (one request's draft tokens as decodes, ``scheduling/step_batch.py``) or a few requests
decoding together. Each row count gets its own bound calls over the first rows of the same
buffers (built on first use); the kernels are the layers' at that row count (the projections'
few-rows kernel, ``native/gguf_blocks_few.h``; the native decode attention over the batch's
ragged slots, where the layers' planner picks it: one request's rows, or a small batch), so
the logits are the layers' bit for bit. Rotary writes q and k to their own buffers (two calls:
its arithmetic is per head), so the attention reads q rows contiguous and the store k's.
Anything else takes the layers' path: an extend, more rows, a batch the planner sends to the
cascade, a subclassed layer or attention (Qwen3's QK-norm, Phi-3's partial rotary, Gemma),
another kernel set, other projections, a bfloat16 KV pool, a slot table that is not int64.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch

from ....kernels import rotary_rows
from ....kernels.cpu import row_ops
from ...memory.kv_pool import KVPool
from ..forward_batch import ForwardBatch
from ..gguf_fused_linear import GGUFFusedLinear
from .decoder import DecoderAttention, DecoderLayer, GatedMLP

_F32, _I64 = torch.float32, torch.int64
# decode rows a bound step takes (a verify's 1 + up to 8 drafts, small batches); buffers are
# [MAX_ROWS, ...] floats, a few hundred KiB for SmolLM2
MAX_ROWS = 16

# (input norm, qkv projection, rope index, window, o projection, post-attention norm,
#  gate|up projection, activation, down projection): a layer's pool-independent calls
_Layer = tuple[Callable[[], None], Callable[[], None], int, int, Callable[[], None],
               Callable[[], None], Callable[[], None], Callable[[], None], Callable[[], None]]


def _plain(t: torch.Tensor) -> bool:
    return t.dtype is _F32 and t.is_cpu and t.is_contiguous()


def _native_ops(ops: object, mlp: GatedMLP) -> bool:
    """Whether the layers run the native set's kernels (those bound here)."""
    return (row_ops.native_module() is not None
            and getattr(ops, "rms_norm", None) is row_ops.rms_norm
            and getattr(ops, "fused_add_rms_norm", None) is row_ops.fused_add_rms_norm
            and getattr(ops, "rotary_rows", None) is row_ops.rotary_rows
            and getattr(ops, "store_kv", None) is row_ops.store_kv
            and getattr(ops, "decode_attention", None) is row_ops.decode_attention
            and getattr(ops, "plan_decode", None) is row_ops.plan_decode
            and mlp.act_mul in (row_ops.silu_mul, row_ops.gelu_tanh_mul))


def _fused(proj: object) -> bool:
    return isinstance(proj, GGUFFusedLinear) and proj._fused is not None


def supported(layers: list[DecoderLayer]) -> bool:
    """Whether :class:`NativeDecodeStep` reproduces these layers' one-token decode."""
    if not layers:
        return False
    first = layers[0].self_attn
    for layer in layers:
        attn, mlp = layer.self_attn, layer.mlp
        if (type(layer) is not DecoderLayer or type(attn) is not DecoderAttention
                or type(mlp) is not GatedMLP or not _native_ops(layer.ops, mlp)
                or attn.rotary_dim != attn.head_dim or attn.head_dim % 2
                or (attn.num_heads, attn.num_kv_heads, attn.head_dim, mlp.intermediate)
                != (first.num_heads, first.num_kv_heads, first.head_dim,
                    layers[0].mlp.intermediate)
                or not all(_fused(p) for p in (attn.qkv_proj, attn.o_proj, mlp.gate_up_proj,
                                               mlp.down_proj))
                or not all(_plain(w) for w in (layer.input_layernorm,
                                               layer.post_attention_layernorm))):
            return False
    return True


class NativeDecodeStep:
    """Decode rows (1 to :data:`MAX_ROWS`) through ``layers`` (see :func:`supported`) into
    the final norm's output; buffers are this object's and reused every step (one step at a
    time)."""

    def __init__(self, layers: list[DecoderLayer], final_weight: torch.Tensor,
                 eps: float) -> None:
        attn, mlp = layers[0].self_attn, layers[0].mlp
        hidden = attn.o_proj.out_features
        self.hq, self.hkv, self.d = attn.num_heads, attn.num_kv_heads, attn.head_dim
        self.hidden, self.sm_scale, self.eps = hidden, float(attn.sm_scale), eps
        self.attend = row_ops.decode_kernel(self.hq, self.hkv, self.d)
        new = lambda *shape: torch.zeros(MAX_ROWS, *shape, dtype=_F32)  # noqa: E731
        self.res, self.h, self.x = new(hidden), new(hidden), new(hidden)
        self.qkv = new(attn.qkv_proj.out_features)
        self.q, self.k, self.out = new(self.hq, self.d), new(self.hkv, self.d), new(self.hq,
                                                                                   self.d)
        self.o = new(hidden)
        self.gate_up, self.act = new(2 * mlp.intermediate), new(mlp.intermediate)
        self.indptr = torch.zeros(2, dtype=_I64)
        self._indptr = self.indptr.numpy()  # a 1-row step's length written here each step
        self.final_weight = final_weight
        self.ropes: list[tuple[str, torch.Tensor, torch.Tensor]] = []  # (key, cos, sin)
        for layer in layers:
            rope = layer.self_attn.rope
            if rope.key not in [key for key, _, _ in self.ropes]:
                self.ropes.append((rope.key, rope.cos, rope.sin))
        self._layers = layers
        self.windows = sorted({layer.self_attn.sliding_window for layer in layers})
        self.layer_ids = [layer.self_attn.layer_id for layer in layers]
        # per row count: (the layers' bound calls, the final norm), built on first use
        self._bound: dict[int, tuple[list[_Layer], Callable[[], None]]] = {}
        self._pool: KVPool | None = None
        self._pool_key = 0
        self._pool_args: list[tuple[int, int, int]] = []

    def _rows(self, t: int) -> tuple[list[_Layer], Callable[[], None]]:
        """The bound calls over the buffers' first ``t`` rows."""
        if t not in self._bound:
            norm = row_ops.native_module().add_rms_norm
            res, h = self.res.data_ptr(), self.h.data_ptr()
            final = partial(norm, self.x.data_ptr(), res, self.final_weight.data_ptr(), h, res,
                            t, self.hidden, self.eps)
            self._bound[t] = ([self._bind(layer, i == 0, t)
                               for i, layer in enumerate(self._layers)], final)
        return self._bound[t]

    def _bind(self, layer: DecoderLayer, first: bool, t: int) -> _Layer:
        attn, mlp, eps = layer.self_attn, layer.mlp, layer.eps
        norm = row_ops.native_module().add_rms_norm
        n, res, h = self.hidden, self.res.data_ptr(), self.h.data_ptr()
        w_in = layer.input_layernorm.data_ptr()
        norm_in = (partial(norm, res, 0, w_in, h, 0, t, n, eps) if first  # rms_norm(x)
                   else partial(norm, self.x.data_ptr(), res, w_in, h, res, t, n, eps))
        post = partial(norm, self.o.data_ptr(), res, layer.post_attention_layernorm.data_ptr(),
                       h, res, t, n, eps)
        inter = mlp.intermediate
        act = partial(row_ops.native_module().silu_mul if mlp.act_mul is row_ops.silu_mul
                      else row_ops.native_module().gelu_tanh_mul,
                      self.gate_up.data_ptr(), self.act.data_ptr(), t, inter)
        keys = [key for key, _, _ in self.ropes]
        return (norm_in, self._project(attn.qkv_proj, self.h[:t], self.qkv[:t]),
                keys.index(attn.rope.key), attn.sliding_window,
                self._project(attn.o_proj, self.out[:t].view(t, -1), self.o[:t]), post,
                self._project(mlp.gate_up_proj, self.h[:t], self.gate_up[:t]), act,
                self._project(mlp.down_proj, self.act[:t], self.x[:t]))

    @staticmethod
    def _project(proj: GGUFFusedLinear, x: torch.Tensor, y: torch.Tensor) -> Callable[[], None]:
        """``y = proj(x)`` as :meth:`GGUFFusedLinear.forward` computes it (bias added after)."""
        call = proj._fused.bound(x, y)
        bias = proj.bias
        if bias is None:
            return call

        def with_bias() -> None:
            call()
            y.add_(bias)
        return with_bias

    def takes(self, batch: ForwardBatch, pool: KVPool, x: torch.Tensor) -> bool:
        """Whether this step is decode rows this object runs as the layers would: 1 to
        :data:`MAX_ROWS` of them, float32 KV and embedding, int64 CPU slots, and (above one
        row) the native attention over the batch's ragged slots where the layers' planner
        chooses it."""
        slots, t = batch.seq_slots, x.shape[0]
        return (0 < t <= MAX_ROWS and x.shape[1] == self.hidden and x.dtype is _F32
                and x.is_contiguous() and not batch.has_extend
                and batch.logits_rows.shape[0] == t  # every row's logits, in order
                and slots.dtype is _I64 and slots.is_cpu and slots.stride(-1) == 1
                and batch.out_cache_loc.dtype is _I64 and batch.out_cache_loc.is_contiguous()
                and self._pool_ready(pool)
                and (t == 1 or all(batch.decode_plan(w, row_ops.plan_decode) is None
                                   for w in self.windows)))

    def _pool_ready(self, pool: KVPool) -> bool:
        """Binds the pool's per-layer pointers (once per pool): float32 contiguous only."""
        key = pool.k_buffers[0].data_ptr()
        if pool is self._pool and key == self._pool_key:
            return True
        args = []
        for i in self.layer_ids:
            k, v = pool.k_buffers[i], pool.v_buffers[i]
            if not (_plain(k) and _plain(v) and k.dim() == 4 and v.shape == k.shape
                    and k.shape[2:] == (self.hkv, self.d)):
                return False
            args.append((k.data_ptr(), v.data_ptr(), k.numel() // (self.hkv * self.d)))
        self._pool, self._pool_key, self._pool_args = pool, key, args  # (held: no id reuse)
        return True

    def _kv_ranges(self, batch: ForwardBatch, t: int
                   ) -> tuple[int, int, int, tuple[torch.Tensor, ...]]:
        """``(indptr, indices, count, kept)``: the attention's slot ranges per row (pointers
        and the indices' count; ``kept`` holds the tensors alive until the step ends). One
        row: its padded table row, as ``[0, length)``; more: the batch's ragged slots, as the
        layers' decode attention reads them."""
        if t == 1:
            length = int(batch.seq_lens[0])
            self._indptr[1] = length
            return self.indptr.data_ptr(), batch.seq_slots.data_ptr(), length, ()
        indptr, indices = batch.dec_kv_indptr, batch.dec_kv_indices
        return indptr.data_ptr(), indices.data_ptr(), indices.shape[0], (indptr, indices)

    def final_hidden(self, batch: ForwardBatch, x: torch.Tensor) -> torch.Tensor:
        """The final norm's output ``[T, hidden]`` (a view of this object's buffer, valid
        until the next step) after every layer has run on ``x`` (the embedding rows, float32)
        and stored its K/V in the pool :meth:`takes` accepted."""
        t = x.shape[0]
        layers, final_norm = self._rows(t)
        self.res[:t].copy_(x)
        native = row_ops.native_module()
        rotary, store, attend = native.rotary_rows, native.store_kv, self.attend
        # the rows DecoderAttention._rotary_tables gathers (kept alive until the step ends)
        rows = [rotary_rows(batch.positions, cos, sin, _F32) for _, cos, sin in self.ropes]
        rot = [(c.data_ptr(), s.data_ptr()) for c, s in rows]
        slot = batch.out_cache_loc.data_ptr()
        indptr, indices, count, _kept = self._kv_ranges(batch, t)
        hq, hkv, d, scale = self.hq, self.hkv, self.d, self.sm_scale
        row, wide = hkv * d, (hq + 2 * hkv) * d  # a K/V row; a projection row
        qkv, q, k, out = (self.qkv.data_ptr(), self.q.data_ptr(), self.k.data_ptr(),
                          self.out.data_ptr())
        k_in, v_in = qkv + 4 * hq * d, qkv + 4 * (hq + hkv) * d
        for (norm_in, qkv_proj, rope, window, o_proj, post, gate_up, act, down), (
                k_pool, v_pool, num_slots) in zip(layers, self._pool_args):
            norm_in()
            qkv_proj()
            cos, sin = rot[rope]
            rotary(qkv, wide, cos, sin, q, t, hq, d)  # per head: as one call over q and k
            rotary(k_in, wide, cos, sin, k, t, hkv, d)
            store(k_pool, v_pool, num_slots, slot, k, v_in, t, row, row, wide)
            attend(q, k_pool, v_pool, num_slots, indptr, indices, count, out, t, hq, hkv, d,
                   window, 0, scale, 0.0)
            o_proj()
            post()
            gate_up()
            act()
            down()
        final_norm()
        return self.h[:t]
