"""How each array library's counterpart of a ``keras.ops`` function is called: the arguments it
takes where they differ from Keras's (``torch.cumsum`` needs ``dim``, ``jax.image.resize`` a
``method``, scipy's ``map_coordinates`` takes ``order`` by keyword), and the references that
have no comparable call ("no counterpart": an attribute, an in-place ``ufunc.at``, a call that
takes a Python function). One table, keyed by the reference's path
(``catalog/ops_table.json``'s ``references``); a path not in it is called as Keras's op is.

>>> import numpy as np
>>> call_reference("torch.cumsum", lambda x, dim: ("cumsum", x.shape, dim), (np.ones((2, 3)),), {})
('cumsum', (6,), 0)
>>> no_counterpart("numpy.ndarray.dtype")
'an attribute, not a function: the op returns a dtype, not an array'
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dtype_explorer.keras_run.references import _adapters as _reference_adapters
from dtype_explorer.keras_run.references import _openvino as _openvino_reference
from dtype_explorer.keras_run.references._adapters import Adapter
from dtype_explorer.records import NO_COUNTERPART

__all__ = ["NO_COUNTERPART", "call_reference", "no_counterpart"]


_ATTRIBUTE = "an attribute, not a function: the op returns a dtype, not an array"
_UFUNC_AT = "an in-place ufunc.at: its output dtype is the buffer given, not the library's answer"
_FUNCTION = "takes a Python function: the dtype it returns is that function's, not the library's"
_CUSTOM_GRADIENT = "wraps a Python function with its gradient: it returns a function, not an array"
#: Reference path -> why the library has no comparable call.
NONE_COMPARABLE: dict[str, str] = {
    "numpy.ndarray.dtype": _ATTRIBUTE,
    "jax.Array.dtype": _ATTRIBUTE,
    "torch.Tensor.dtype": _ATTRIBUTE,
    "numpy.vectorize": "takes a Python function: it returns a function, not an array",
    "jax.numpy.vectorize": "takes a Python function: it returns a function, not an array",
    "scipy.ndimage.affine_transform": (
        "Keras's transform is 8 projective parameters per image, scipy's one affine matrix"
    ),
    "numpy.add.at": _UFUNC_AT,
    "numpy.maximum.at": _UFUNC_AT,
    "numpy.minimum.at": _UFUNC_AT,
    "numpy.multiply.at": _UFUNC_AT,
    "torch.segment_reduce": "reduces by segment lengths, not by segment ids",
    "torch.dot": "takes only 1-D vectors: Keras's dot of matrices is torch.matmul's",
    **dict.fromkeys(
        (
            "jax.lax.associative_scan",
            "jax.lax.cond",
            "jax.lax.fori_loop",
            "jax.lax.map",
            "jax.lax.scan",
            "jax.lax.switch",
            "jax.lax.while_loop",
            "jax.jvp",
            "jax.vmap",
            "torch.cond",
            "torch.func.jvp",
            "torch.vmap",
        ),
        _FUNCTION,
    ),
    "jax.custom_vjp": _CUSTOM_GRADIENT,
    "torch.autograd.Function": _CUSTOM_GRADIENT,
}


def _flat_axis(fn: Callable[..., Any], args: tuple, kwargs: dict, op: str) -> Any:
    """``torch.cumsum(x, dim)``: Keras's ``axis=None`` runs over the flattened array."""
    x = args[0]
    axis = args[1] if len(args) > 1 else kwargs.get("axis")
    return fn(x.reshape(-1), dim=0) if axis is None else fn(x, dim=axis)


def _last_axis_norm(fn: Callable[..., Any], args: tuple, kwargs: dict, op: str) -> Any:
    """``torch.nn.functional.layer_norm(x, normalized_shape)``: Keras normalizes the last axis."""
    x = args[0]
    return fn(x, normalized_shape=tuple(x.shape[-1:]))


def _resize(fn: Callable[..., Any], args: tuple, kwargs: dict, op: str) -> Any:
    """``jax.image.resize(image, shape, method)``: the batch and channels kept (channels last)."""
    images, size = args[0], tuple(args[1])
    shape = (*images.shape[:-3], *size, images.shape[-1])
    return fn(images, shape, method=kwargs.get("interpolation", "bilinear"))


def _map_coordinates(fn: Callable[..., Any], args: tuple, kwargs: dict, op: str) -> Any:
    """``map_coordinates(input, coordinates, order=...)``: scipy's third positional is
    ``output``."""
    x, coordinates, *rest = args
    order = rest[0] if rest else kwargs.get("order", 1)
    return fn(x, coordinates, order=order)


def _gaussian_filter(fn: Callable[..., Any], args: tuple, kwargs: dict, op: str) -> Any:
    """``gaussian_filter(input, sigma)``: Keras's default sigma 1.0 over the two spatial axes
    (channels last), none across the batch or channels."""
    x = args[0]
    sigma = [0.0] * x.ndim
    for axis in (x.ndim - 3, x.ndim - 2):
        sigma[axis] = 1.0
    return fn(x, sigma=sigma)


def _irfft(fn: Callable[..., Any], args: tuple, kwargs: dict, op: str) -> Any:
    """``irfft(a, n)``: Keras takes the ``(real, imag)`` pair and ``fft_length``."""
    real, imag = args[0]
    complex_ = real + 1j * imag
    return fn(complex_, n=kwargs.get("fft_length"))


def _torch_irfft(fn: Callable[..., Any], args: tuple, kwargs: dict, op: str) -> Any:
    import torch

    real, imag = args[0]
    return fn(torch.complex(real, imag), n=kwargs.get("fft_length"))


#: Reference path -> how it is called (from Keras's positional arguments and keywords).
ADAPTERS: dict[str, Adapter] = {
    "torch.cumsum": _flat_axis,
    "torch.cumprod": _flat_axis,
    "torch.nn.functional.layer_norm": _last_axis_norm,
    "torch.nn.functional.rms_norm": _last_axis_norm,
    "jax.image.resize": _resize,
    "scipy.ndimage.map_coordinates": _map_coordinates,
    "jax.scipy.ndimage.map_coordinates": _map_coordinates,
    "scipy.ndimage.gaussian_filter": _gaussian_filter,
    "numpy.fft.irfft": _irfft,
    "jax.numpy.fft.irfft": _irfft,
    "torch.fft.irfft": _torch_irfft,
    **_reference_adapters.ADAPTERS,
    **_openvino_reference.ADAPTERS,
}


def no_counterpart(path: str) -> str | None:
    """Why the reference at ``path`` has no call comparable with Keras's op (``None``: it has).

    Args:
        path: a reference's dotted path (``"numpy.add.at"``).

    Returns:
        The reason in words, or ``None``.
    """
    return NONE_COMPARABLE.get(path)


def call_reference(
    path: str, fn: Callable[..., Any], args: tuple, kwargs: dict, op: str = ""
) -> Any:
    """Call the reference at ``path`` as its library expects, on Keras's op's arguments.

    Args:
        path: the reference's dotted path (the adapter table's key).
        fn: the function found at ``path``.
        args: the positional arguments Keras's op is called with (as the library's arrays).
        kwargs: the keyword arguments Keras's op is called with.
        op: the Keras op's name (``"ops.max_pool"``), for a reference two ops share
            (``jax.lax.reduce_window``).

    Returns:
        What the library returned.
    """
    adapter = ADAPTERS.get(path)
    if adapter is None:
        return fn(*args, **kwargs)
    return adapter(fn, args, kwargs, op)
