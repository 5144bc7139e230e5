"""The knobs read in ``env.py``: threads (the default rule, the spin-wait warning's input) and
the kernel backend names."""

from __future__ import annotations

import pytest

from radixlm import env


@pytest.mark.parametrize(("value", "spins"), [(None, True), ("ACTIVE", True),
                                              ("PASSIVE", False), (" passive ", False)])
def test_omp_spin_waits_unless_passive(monkeypatch, value, spins):
    if value is None:
        monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    else:
        monkeypatch.setenv("OMP_WAIT_POLICY", value)
    assert env.omp_spin_waits() is spins


def test_one_thread_by_default_and_bad_counts_are_named(monkeypatch):
    monkeypatch.delenv("RADIXLM_NUM_THREADS", raising=False)
    assert env.num_threads_default() == 1
    monkeypatch.setenv("RADIXLM_NUM_THREADS", "2")
    assert env.num_threads_default() == 2
    for bad, reason in (("two", "must be an integer"), ("0", "must be >= 1")):
        monkeypatch.setenv("RADIXLM_NUM_THREADS", bad)
        with pytest.raises(ValueError, match=f"RADIXLM_NUM_THREADS {reason}"):
            env.num_threads_default()


@pytest.mark.parametrize("value", ["auto", "torch", " Native ", "triton"])
def test_kernel_backend_names_include_the_native_set(monkeypatch, value):
    monkeypatch.setenv("RADIXLM_KERNEL_BACKEND", value)
    assert env.kernel_backend() == value.strip().lower()


def test_an_unknown_kernel_backend_is_named(monkeypatch):
    monkeypatch.setenv("RADIXLM_KERNEL_BACKEND", "cuda")
    with pytest.raises(ValueError, match="auto, torch, native, triton; got 'cuda'"):
        env.kernel_backend()
