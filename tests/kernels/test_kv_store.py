"""KV store: the reference against a per-token loop, the Triton kernel against the reference."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from kernel_testlib import BadArg, assert_rejected, bad_arg_params, poisoned, randint, randn

from radixlm.kernels import store_kv_ref

SHAPES = [  # (num_kv_heads, head_dim, page_size)
    pytest.param(1, 64, 1, id="kv1-d64-ps1"),
    pytest.param(2, 128, 16, id="kv2-d128-ps16"),
    pytest.param(8, 96, 16, id="kv8-d96-ps16"),
]
DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def build(gen: torch.Generator, heads: int, head_dim: int, page_size: int, dtype: torch.dtype,
          device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
                                         torch.Tensor]:
    """NaN-poisoned pools, distinct random slots (not page aligned), new K/V rows."""
    num_pages = randint(gen, 5, 9)
    num_tokens = randint(gen, 1, num_pages * page_size - 1)
    shape = (num_pages, page_size, heads, head_dim)
    k_cache, v_cache = poisoned(shape, dtype, device), poisoned(shape, dtype, device)
    slots = torch.randperm(num_pages * page_size, generator=gen)[:num_tokens]
    k = randn(gen, num_tokens, heads, head_dim, dtype=dtype, device=device)
    v = randn(gen, num_tokens, heads, head_dim, dtype=dtype, device=device)
    return k_cache, v_cache, slots.to(device), k, v


def written_as_expected(cache: torch.Tensor, slots: torch.Tensor, new: torch.Tensor) -> None:
    """Slot rows hold exactly ``new`` (bit for bit); every other row is still NaN."""
    flat = cache.view(-1, cache.shape[2], cache.shape[3])
    assert torch.equal(flat[slots.long()], new)
    untouched = torch.ones(flat.shape[0], dtype=torch.bool, device=flat.device)
    untouched[slots.long()] = False
    assert flat[untouched].isnan().all()


@pytest.mark.parametrize(("heads", "head_dim", "page_size"), SHAPES)
def test_reference_matches_loop(heads: int, head_dim: int, page_size: int,
                                gen: torch.Generator) -> None:
    cpu = torch.device("cpu")
    k_cache, v_cache, slots, k, v = build(gen, heads, head_dim, page_size, torch.float32, cpu)
    expected = k_cache.clone()
    for i, s in enumerate(slots.tolist()):
        expected[s // page_size, s % page_size] = k[i]
    store_kv_ref(k_cache, v_cache, slots, k, v)
    assert torch.equal(k_cache.nan_to_num(7.0), expected.nan_to_num(7.0))
    written_as_expected(v_cache, slots, v)


@pytest.mark.triton_interpret
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(("heads", "head_dim", "page_size"), SHAPES)
def test_triton_matches_reference(heads: int, head_dim: int, page_size: int,
                                  dtype: torch.dtype, gen: torch.Generator,
                                  device: torch.device) -> None:
    from radixlm.kernels.triton.kv_store import store_kv_triton

    k_cache, v_cache, slots, k, v = build(gen, heads, head_dim, page_size, dtype, device)
    k = torch.cat((k, k), dim=1)[:, ::2]  # a strided view: rows need not be contiguous
    store_kv_triton(k_cache, v_cache, slots.int(), k, v)
    written_as_expected(k_cache, slots, k)
    written_as_expected(v_cache, slots, v)


BAD_ARGS: list[BadArg] = [
    ("cache-3d", lambda a: a.update(k_cache=a["k_cache"][0]), ValueError,
     "k_cache: expected 4 dimensions"),
    ("cache-noncontig", lambda a: a.update(v_cache=a["v_cache"].transpose(0, 1)), ValueError,
     "v_cache: expected a contiguous"),
    ("v-cache-dtype", lambda a: a.update(v_cache=a["v_cache"].half()), ValueError,
     "v_cache: expected the same shape and dtype"),
    ("slots-float", lambda a: a.update(slots=a["slots"].float()), TypeError,
     "slots: expected dtype"),
    ("k-heads", lambda a: a.update(k=a["k"][:, :1]), ValueError, "k: expected size 2 at dim 1"),
    ("v-tokens", lambda a: a.update(v=a["v"][1:]), ValueError, "v: expected size"),
    ("k-dtype", lambda a: a.update(k=a["k"].double()), TypeError, "k: expected dtype"),
    ("k-device", lambda a: a.update(k=a["k"].to("meta")), ValueError, "k: expected a tensor on"),
    ("k-inner-stride", lambda a: a.update(k=torch.cat((a["k"], a["k"]), dim=2)[:, :, ::2]),
     ValueError, "k: expected the last dimension"),
]


@pytest.mark.parametrize(("mutate", "exc", "match"), bad_arg_params(BAD_ARGS))
def test_triton_rejects_bad_arguments_before_launch(
    mutate: Callable[[dict], None], exc: type[Exception], match: str, gen: torch.Generator,
    no_launch: None,
) -> None:
    from radixlm.kernels.triton.kv_store import store_kv_triton

    k_cache, v_cache, slots, k, v = build(gen, 2, 64, 16, torch.float32, torch.device("cpu"))
    args = dict(k_cache=k_cache, v_cache=v_cache, slots=slots, k=k, v=v)
    assert_rejected(store_kv_triton, args, mutate, exc, match)
