"""Workers share one GPU (issue 28): the settings are set before each backend imports and read
back inside real workers (on a CPU machine too: the variables and the libraries' own answers)."""

from __future__ import annotations

import pytest

from dtype_explorer import pool
from dtype_explorer.runtime._gpu import SHARED, gpu_sharing

WAIT = 240


@pytest.mark.parametrize("backend", ["jax", "torch", "tensorflow"])
def test_each_worker_shares_the_gpu_as_its_backend_saw_it(backend):
    found = pool.call(backend, gpu_sharing).result(timeout=WAIT)
    assert {name: found[name] for name in SHARED} == SHARED
    assert found["PYTORCH_CUDA_ALLOC_CONF"]  # torch's caching allocator, not fragmenting
    # only the jax worker lets jax (imported by Keras everywhere) see the GPU
    assert (found["JAX_PLATFORMS"] == "cpu") is (backend != "jax")
    if backend == "tensorflow":
        assert all(found["tensorflow.memory_growth"])  # [] on a machine without a GPU
    if backend == "torch":
        assert found["torch.allocator"] == ("native" if found["torch.cuda"] else None)
    if backend == "jax":
        assert found["jax.platform"] in ("cpu", "gpu", "cuda")
