"""radixlm.kernels.cpu.native.load: a module that was not built is None, never an ImportError."""

from radixlm.kernels.cpu import native


def test_a_kernel_that_was_not_built_loads_as_none() -> None:
    assert native.load("no_such_kernel") is None
