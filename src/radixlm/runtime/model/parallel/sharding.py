"""Which part of the model each tensor-parallel rank holds (pure arithmetic, no torch).

Megatron layout: q/k/v and gate/up are split by output rows (column-parallel), o and down by
input columns (row-parallel, summed by an all-reduce), the vocabulary by rows (embedding and
LM head). KV heads are split across ranks; when there are fewer KV heads than ranks each one
is replicated on ``tp_size // num_kv_heads`` consecutive ranks, so rank ``r``'s query heads
always read a KV head it holds.

Uneven head counts are refused, not padded (as SGLang does): SmolLM2-135M (9 query heads, 3 KV
heads) cannot run with ``tp_size=2`` but can with ``tp_size=3``. Padding heads would change
the attention math of the padded ranks and the checkpoint layout; refusing names the sizes
that work instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model_config import ModelConfig, UnsupportedModelError


class TensorParallelError(UnsupportedModelError):
    """The model's shape cannot be split over this many ranks."""


def valid_tp_sizes(cfg: ModelConfig, limit: int = 64) -> list[int]:
    """Every ``tp_size`` up to ``limit`` this model can be split over."""
    return [tp for tp in range(1, limit + 1) if not _split_problems(cfg, tp)]


def _split_problems(cfg: ModelConfig, tp_size: int) -> list[str]:
    """The sizes of ``cfg`` that do not split over ``tp_size`` ranks (empty: it splits)."""
    hq, hkv = cfg.num_heads, cfg.num_kv_heads
    problems = []
    if hq % tp_size:
        problems.append(f"num_attention_heads ({hq})")
    if hkv % tp_size and tp_size % hkv:
        problems.append(f"num_key_value_heads ({hkv}: neither a multiple nor a divisor of "
                        "tp_size)")
    if cfg.intermediate_size % tp_size:
        problems.append(f"intermediate_size ({cfg.intermediate_size})")
    return problems


@dataclass(frozen=True)
class TPSharding:
    """Rank ``rank`` of ``tp_size``: its head, intermediate and vocabulary ranges."""

    tp_size: int
    rank: int
    head_dim: int
    q_heads: tuple[int, int]  # [start, end) query heads
    kv_heads: tuple[int, int]  # [start, end) KV heads (a replicated one when kv < tp)
    inter: tuple[int, int]  # [start, end) MLP intermediate rows
    vocab: tuple[int, int]  # [start, end) real vocabulary rows held (may be short on the last)
    vocab_per_rank: int  # rows every rank allocates: ceil(vocab / tp); the tail is zero padding
    vocab_size: int

    @classmethod
    def create(cls, cfg: ModelConfig, tp_size: int, rank: int) -> TPSharding:
        """Validate that ``cfg`` splits over ``tp_size`` ranks and return rank ``rank``'s part."""
        if tp_size < 1 or not 0 <= rank < tp_size:
            raise ValueError(f"need tp_size >= 1 and 0 <= rank < tp_size, got {tp_size}, {rank}")
        problems = _split_problems(cfg, tp_size)
        if problems:
            raise TensorParallelError(
                f"cannot split this model over tp_size={tp_size}: {', '.join(problems)} "
                f"not divisible by {tp_size} (uneven heads are refused, not padded); "
                f"tp sizes that work: {valid_tp_sizes(cfg, 16)}")
        hq, hkv = cfg.num_heads, cfg.num_kv_heads
        q_local = hq // tp_size
        if hkv >= tp_size:
            kv_local = hkv // tp_size
            kv_start = rank * kv_local
        else:  # replicated: ranks [j * tp/hkv, (j+1) * tp/hkv) share KV head j
            kv_local, kv_start = 1, rank // (tp_size // hkv)
        inter_local = cfg.intermediate_size // tp_size
        v_local = -(-cfg.vocab_size // tp_size)
        v_start = min(rank * v_local, cfg.vocab_size)
        return cls(
            tp_size=tp_size, rank=rank, head_dim=cfg.head_dim,
            q_heads=(rank * q_local, (rank + 1) * q_local),
            kv_heads=(kv_start, kv_start + kv_local),
            inter=(rank * inter_local, (rank + 1) * inter_local),
            vocab=(v_start, min(v_start + v_local, cfg.vocab_size)),
            vocab_per_rank=v_local, vocab_size=cfg.vocab_size,
        )

    @property
    def num_q_heads(self) -> int:
        return self.q_heads[1] - self.q_heads[0]

    @property
    def num_kv_heads(self) -> int:
        return self.kv_heads[1] - self.kv_heads[0]

    def local_config(self, cfg: ModelConfig) -> ModelConfig:
        """``cfg`` with this rank's sizes: the model built from it has local shapes."""
        import dataclasses

        return dataclasses.replace(
            cfg, num_heads=self.num_q_heads, num_kv_heads=self.num_kv_heads,
            intermediate_size=self.inter[1] - self.inter[0], vocab_size=self.vocab_per_rank)

    def row_range(self, kind: str) -> tuple[int, int]:
        """Rows (or columns, for row-parallel weights) of a full tensor this rank reads."""
        d = self.head_dim
        if kind == "q":
            return self.q_heads[0] * d, self.q_heads[1] * d
        if kind == "kv":
            return self.kv_heads[0] * d, self.kv_heads[1] * d
        if kind == "inter":
            return self.inter
        if kind == "vocab":
            return self.vocab
        raise ValueError(f"unknown shard kind {kind!r}")
