"""How the jax, torch and ``tf.experimental.numpy`` counterparts of ``keras.ops`` functions are
called, where their arguments differ from Keras's: channels-first layouts (torch's
convolutions, pools and pixel shuffles), a ``dim`` Keras leaves to its default
(``torch.softmax``: the last axis), Keras's positional order moved to the library's
(``jax.lax.dynamic_update_slice``), the ``(real, imag)`` pair Keras takes for complex input
made one complex array, the index arrays torch takes only as ``int64`` (the probed dtype is
never converted: a library refusing it stays a raise), and tnp's dtype objects, ``pad`` mode
and ``TensorShape``. Part of :mod:`~dtype_explorer.keras_run.references._calls`'s table, keyed
by the reference's path.

>>> import numpy as np
>>> ADAPTERS["torch.permute"](lambda x, dims: dims, (np.ones((2, 3)),), {}, "ops.transpose")
(1, 0)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["ADAPTERS", "Adapter"]

#: ``(fn, args, kwargs, op)``: the library's function, Keras's positional arguments and
#: keywords (as the library's arrays), and the Keras op's name; returns the library's answer.
Adapter = Callable[[Callable[..., Any], tuple, dict, str], Any]


def _arg(args: tuple, kwargs: dict, i: int, name: str, default: Any = None) -> Any:
    """Keras's argument ``name``, given at position ``i`` or by keyword."""
    return args[i] if len(args) > i else kwargs.get(name, default)


def _all_axes(x: Any, axis: Any) -> Any:
    """Keras's ``axis=None`` (every axis) as an explicit tuple."""
    return tuple(range(x.ndim)) if axis is None else axis


# 1. Complex input: Keras takes a (real, imag) pair.


def _complex_pair(fn: Callable[..., Any], args: tuple, kwargs: dict, op: str) -> Any:
    """``fft(a)``: one complex array from Keras's ``(real, imag)``."""
    real, imag = args[0]
    return fn(real + 1j * imag)


def _torch_complex_pair(fn: Callable[..., Any], args: tuple, kwargs: dict, op: str) -> Any:
    import torch

    real, imag = args[0]
    return fn(torch.complex(real, imag))


def _jax_stft(fn: Callable[..., Any], args: tuple, kwargs: dict, op: str) -> Any:
    """``jax.scipy.signal.stft(x, nperseg=, noverlap=, nfft=)``; its answer is ``(f, t, Zxx)``:
    the transform is the last."""
    x, length, stride, fft_length = args[:4]
    return fn(x, nperseg=length, noverlap=length - stride, nfft=fft_length)[-1]


def _jax_istft(fn: Callable[..., Any], args: tuple, kwargs: dict, op: str) -> Any:
    """``jax.scipy.signal.istft(Zxx)`` with frequencies before frames (Keras: frames first);
    its answer is ``(t, x)``: the signal is the last."""
    real, imag = args[0]
    length, stride, fft_length = args[1:4]
    zxx = (real + 1j * imag).swapaxes(-1, -2)
    return fn(zxx, nperseg=length, noverlap=length - stride, nfft=fft_length)[-1]


def _torch_stft(fn: Callable[..., Any], args: tuple, kwargs: dict, op: str) -> Any:
    x, length, stride, fft_length = args[:4]
    return fn(x, fft_length, hop_length=stride, win_length=length, return_complex=True)


def _torch_istft(fn: Callable[..., Any], args: tuple, kwargs: dict, op: str) -> Any:
    import torch

    real, imag = args[0]
    length, stride, fft_length = args[1:4]
    spectrum = torch.complex(real, imag).transpose(-1, -2)
    return fn(spectrum, fft_length, hop_length=stride, win_length=length)


# 2. Layouts: Keras is channels last, torch's nn functions channels first.


def _channels_first(x: Any) -> Any:
    return x.permute(0, x.ndim - 1, *range(1, x.ndim - 1))


def _channels_last(x: Any) -> Any:
    return x.permute(0, *range(2, x.ndim), 1)


def _torch_pool(fn: Callable[..., Any], args: tuple, kwargs: dict, op: str) -> Any:
    x, pool = args[0], _arg(args, kwargs, 1, "pool_size")
    stride = _arg(args, kwargs, 2, "strides") or pool
    return _channels_last(fn(_channels_first(x), kernel_size=pool, stride=stride))


def _jax_pool(fn: Callable[..., Any], args: tuple, kwargs: dict, op: str) -> Any:
    """``jax.lax.reduce_window``: a max over each window (``max_pool``), or a sum divided by
    the window's size (``average_pool``, as jax's own ``stax.AvgPool``)."""
    from jax import lax

    x, pool = args[0], _arg(args, kwargs, 1, "pool_size")
    stride = _arg(args, kwargs, 2, "strides") or pool
    spatial = x.ndim - 2
    window = (1, *(pool,) * spatial, 1)
    strides = (1, *(stride,) * spatial, 1)
    if op == "ops.max_pool":
        floor = -np.inf if np.issubdtype(x.dtype, np.inexact) else np.iinfo(x.dtype).min
        return fn(x, np.array(floor, x.dtype), lax.max, window, strides, "VALID")
    return fn(x, np.array(0, x.dtype), lax.add, window, strides, "VALID") / pool**spatial


def _jax_conv(fn: Callable[..., Any], args: tuple, kwargs: dict, op: str) -> Any:
    """``conv_general_dilated`` on Keras's layouts (``NWC`` input, ``WIO`` kernel); a
    depthwise kernel ``(W, C, M)`` is ``C`` groups of ``M`` filters."""
    x, kernel = args[0], args[1]
    spatial = "DHW"[3 - (x.ndim - 2) :]
    groups = 1
    if op == "ops.depthwise_conv":
        groups = kernel.shape[-2]
        kernel = kernel.reshape((*kernel.shape[:-2], 1, -1))
    numbers = (f"N{spatial}C", f"{spatial}IO", f"N{spatial}C")
    return fn(
        x,
        kernel,
        window_strides=(1,) * (x.ndim - 2),
        padding="VALID",
        dimension_numbers=numbers,
        feature_group_count=groups,
    )


def _jax_conv_transpose(fn: Callable[..., Any], args: tuple, kwargs: dict, op: str) -> Any:
    x, kernel = args[0], args[1]
    spatial = "DHW"[3 - (x.ndim - 2) :]
    numbers = (f"N{spatial}C", f"{spatial}OI", f"N{spatial}C")
    return fn(x, kernel, strides=(1,) * (x.ndim - 2), padding="VALID", dimension_numbers=numbers)


def _torch_conv(fn: Callable[..., Any], args: tuple, kwargs: dict, op: str) -> Any:
    """``conv1d(input, weight, groups=)``: channels first, the kernel ``(out, in, W)``; a
    depthwise kernel ``(W, C, M)`` is ``C`` groups of ``M`` filters."""
    x, kernel = args[0], args[1]
    groups = 1
    if op == "ops.depthwise_conv":
        groups = kernel.shape[-2]
        kernel = kernel.reshape(*kernel.shape[:-2], 1, -1)
    weight = kernel.permute(kernel.ndim - 1, kernel.ndim - 2, *range(kernel.ndim - 2))
    return _channels_last(fn(_channels_first(x), weight, groups=groups))


def _torch_conv_transpose(fn: Callable[..., Any], args: tuple, kwargs: dict, op: str) -> Any:
    """``conv_transpose1d(input, weight)``: channels first, Keras's ``(W, out, in)`` kernel as
    torch's ``(in, out, W)``."""
    x, kernel = args[0], args[1]
    weight = kernel.permute(kernel.ndim - 1, kernel.ndim - 2, *range(kernel.ndim - 2))
    return _channels_last(fn(_channels_first(x), weight))


def _torch_pixels(fn: Callable[..., Any], args: tuple, kwargs: dict, op: str) -> Any:
    """``pixel_shuffle``/``pixel_unshuffle`` on ``(N, C, H, W)``, Keras's images channels last."""
    return _channels_last(fn(_channels_first(args[0]), _arg(args, kwargs, 1, "block_size")))


def _torch_batch_norm(fn: Callable[..., Any], args: tuple, kwargs: dict, op: str) -> Any:
    """``batch_norm(input, running_mean, running_var)`` with the channels at axis 1."""
    x, mean, variance = args[:3]
    axis = _arg(args, kwargs, 3, "axis", -1)
    eps = kwargs.get("epsilon", 1e-3)
    return fn(x.movedim(axis, 1), mean, variance, eps=eps).movedim(1, axis)


# 3. Arguments Keras defaults or orders differently.


def _torch_last_dim(fn: Callable[..., Any], args: tuple, kwargs: dict, op: str) -> Any:
    """``softmax(x, dim)``: Keras's default axis is the last."""
    return fn(args[0], dim=_arg(args, kwargs, 1, "axis", -1))


def _torch_all_dims(fn: Callable[..., Any], args: tuple, kwargs: dict, op: str) -> Any:
    """``logsumexp(x, dim)``/``flip(x, dims)``: Keras's ``axis=None`` is every axis."""
    x = args[0]
    dims = _all_axes(x, _arg(args, kwargs, 1, "axis"))
    return fn(x, dims if isinstance(dims, tuple) else (dims,))


def _torch_permute(fn: Callable[..., Any], args: tuple, kwargs: dict, op: str) -> Any:
    x = args[0]
    axes = _arg(args, kwargs, 1, "axes")
    return fn(x, tuple(axes) if axes is not None else tuple(reversed(range(x.ndim))))


def _torch_quantile(fn: Callable[..., Any], args: tuple, kwargs: dict, op: str) -> Any:
    """``quantile(x, q)``: q in [0, 1] (Keras's percentile: 0..100), over every axis."""
    x, q = args[0], _arg(args, kwargs, 1, "q")
    return fn(x, q / 100)


def _torch_pad(fn: Callable[..., Any], args: tuple, kwargs: dict, op: str) -> Any:
    """``pad(x, pad)``: one flat tuple, last axis first (Keras: a pair per axis, first first)."""
    x, width = args[0], _arg(args, kwargs, 1, "pad_width")
    return fn(x, tuple(int(n) for pair in reversed(width) for n in pair))


def _torch_narrow(fn: Callable[..., Any], args: tuple, kwargs: dict, op: str) -> Any:
    """``narrow(x, dim, start, length)`` once per axis of Keras's ``start_indices``/``shape``."""
    x, starts, shape = args[:3]
    for dim, (start, length) in enumerate(zip(starts, shape)):
        x = fn(x, dim, int(start), int(length))
    return x


def _torch_index_put(fn: Callable[..., Any], args: tuple, kwargs: dict, op: str) -> Any:
    """``index_put(x, indices, values)``: one index tensor per axis (Keras: one row each)."""
    x, indices, updates = args[:3]
    return fn(x, tuple(indices.long().T), updates)


def _jax_at_set(fn: Callable[..., Any], args: tuple, kwargs: dict, op: str) -> Any:
    """``x.at[indices].set(updates)``: the update jax's arrays have (``jax.Array.at``)."""
    x, indices, updates = args[:3]
    return x.at[tuple(indices.T)].set(updates)


def _torch_index_select(fn: Callable[..., Any], args: tuple, kwargs: dict, op: str) -> Any:
    x, indices = args[0], args[1]
    axis = _arg(args, kwargs, 2, "axis")
    if axis is None:
        return fn(x.reshape(-1), 0, indices.reshape(-1).long())
    return fn(x, axis, indices.reshape(-1).long())


def _torch_take_along(fn: Callable[..., Any], args: tuple, kwargs: dict, op: str) -> Any:
    """``take_along_dim(x, indices, dim)``: torch takes its (fixed, not probed) indices only as
    int64."""
    x, indices = args[0], args[1]
    return fn(x, indices.long(), dim=_arg(args, kwargs, 2, "axis"))


def _torch_nll_loss(fn: Callable[..., Any], args: tuple, kwargs: dict, op: str) -> Any:
    """``nll_loss(input, target)``: the scores first, the int64 class ids second, one loss per
    sample (Keras: the target first)."""
    target, output = args[0], args[1]
    return fn(output, target.long(), reduction="none")


def _torch_ctc_loss(fn: Callable[..., Any], args: tuple, kwargs: dict, op: str) -> Any:
    """``ctc_loss(log_probs (T, N, C), targets, input_lengths, target_lengths)``; Keras's
    ``(target, output (N, T, C), target_length, output_length)``."""
    target, output, target_length, output_length = args[:4]
    return fn(output.transpose(0, 1), target, output_length, target_length, reduction="none")


def _torch_dtype(value: str) -> Any:
    import torch

    return getattr(torch, value)


def _jax_cast(fn: Callable[..., Any], args: tuple, kwargs: dict, op: str) -> Any:
    """``astype(x, dtype)`` / ``x.view(dtype)``: the dtype positional."""
    dtype = _arg(args, kwargs, 1, "dtype")
    return fn(args[0], dtype) if op == "ops.cast" else args[0].view(dtype)


def _torch_cast(fn: Callable[..., Any], args: tuple, kwargs: dict, op: str) -> Any:
    """``x.to(torch.float16)`` / ``x.view(torch.uint8)``: a torch dtype, not its name."""
    return fn(args[0], _torch_dtype(_arg(args, kwargs, 1, "dtype")))


def _jax_scale_and_translate(fn: Callable[..., Any], args: tuple, kwargs: dict, op: str) -> Any:
    """``scale_and_translate(image, shape, spatial_dims, scale, translation, method)``: Keras
    has ``spatial_dims`` after ``translation``."""
    images, shape, scale, translation, spatial_dims, method = args[:6]
    return fn(images, tuple(shape), tuple(spatial_dims), scale, translation, method)


def _jax_update_slice(fn: Callable[..., Any], args: tuple, kwargs: dict, op: str) -> Any:
    """``dynamic_update_slice(operand, update, start_indices)``: Keras has the start first."""
    x, starts, updates = args[:3]
    return fn(x, updates, tuple(starts))


# 4. tf.experimental.numpy (run with its NumPy behaviour on: ``_tf_reference``).


def _tf_cast(fn: Callable[..., Any], args: tuple, kwargs: dict, op: str) -> Any:
    """``tnp.asarray(x, dtype)``: a TensorFlow dtype (tnp reads a dtype's name as a string
    to cast to); no dtype (``convert_to_tensor``'s default): the input's own."""
    import tensorflow as tf

    dtype = _arg(args, kwargs, 1, "dtype")
    return fn(args[0], dtype=None if dtype is None else tf.dtypes.as_dtype(dtype))


def _tf_pad(fn: Callable[..., Any], args: tuple, kwargs: dict, op: str) -> Any:
    """``tnp.pad(array, pad_width, mode)``: ``mode`` has no default (Keras's: ``constant``)."""
    x, width = args[0], _arg(args, kwargs, 1, "pad_width")
    mode = _arg(args, kwargs, 2, "mode", "constant")
    value = kwargs.get("constant_values")
    return fn(x, width, mode) if value is None else fn(x, width, mode, constant_values=value)


def _tf_shape(fn: Callable[..., Any], args: tuple, kwargs: dict, op: str) -> Any:
    """``tnp.shape(x)`` is a ``TensorShape``: its dimensions, Python ints, as NumPy's tuple."""
    return tuple(fn(args[0]))


#: Reference path -> how it is called (Keras's positional arguments and keywords, the op).
ADAPTERS: dict[str, Adapter] = {
    "numpy.fft.fft": _complex_pair,
    "numpy.fft.fft2": _complex_pair,
    "numpy.fft.ifft2": _complex_pair,
    "jax.numpy.fft.fft": _complex_pair,
    "jax.numpy.fft.fft2": _complex_pair,
    "jax.numpy.fft.ifft2": _complex_pair,
    "torch.fft.fft": _torch_complex_pair,
    "torch.fft.fft2": _torch_complex_pair,
    "torch.fft.ifft2": _torch_complex_pair,
    "jax.scipy.signal.stft": _jax_stft,
    "jax.scipy.signal.istft": _jax_istft,
    "torch.stft": _torch_stft,
    "torch.istft": _torch_istft,
    "jax.lax.reduce_window": _jax_pool,
    "torch.nn.functional.avg_pool1d": _torch_pool,
    "torch.nn.functional.max_pool1d": _torch_pool,
    "jax.lax.conv_general_dilated": _jax_conv,
    "jax.lax.conv_transpose": _jax_conv_transpose,
    "torch.nn.functional.conv1d": _torch_conv,
    "torch.nn.functional.conv_transpose1d": _torch_conv_transpose,
    "torch.nn.functional.pixel_shuffle": _torch_pixels,
    "torch.nn.functional.pixel_unshuffle": _torch_pixels,
    "torch.nn.functional.batch_norm": _torch_batch_norm,
    "torch.softmax": _torch_last_dim,
    "torch.log_softmax": _torch_last_dim,
    "torch.logsumexp": _torch_all_dims,
    "torch.flip": _torch_all_dims,
    "torch.permute": _torch_permute,
    "torch.quantile": _torch_quantile,
    "torch.nanquantile": _torch_quantile,
    "torch.nn.functional.pad": _torch_pad,
    "torch.narrow": _torch_narrow,
    "torch.index_put": _torch_index_put,
    "jax.Array.at": _jax_at_set,
    "torch.index_select": _torch_index_select,
    "torch.take_along_dim": _torch_take_along,
    "torch.nn.functional.nll_loss": _torch_nll_loss,
    "torch.nn.functional.ctc_loss": _torch_ctc_loss,
    "jax.numpy.astype": _jax_cast,
    "jax.Array.view": _jax_cast,
    "torch.Tensor.to": _torch_cast,
    "torch.Tensor.view": _torch_cast,
    "jax.image.scale_and_translate": _jax_scale_and_translate,
    "jax.lax.dynamic_update_slice": _jax_update_slice,
    "tensorflow.experimental.numpy.asarray": _tf_cast,
    "tensorflow.experimental.numpy.pad": _tf_pad,
    "tensorflow.experimental.numpy.shape": _tf_shape,
    "torch.Tensor.unfold": lambda fn, args, kwargs, op: fn(args[0], -1, args[1], args[2]),
    "torch.linalg.solve_triangular": lambda fn, args, kwargs, op: fn(
        args[0], args[1], upper=not kwargs.get("lower", False)
    ),
    "torch.tensordot": lambda fn, args, kwargs, op: fn(
        args[0], args[1], dims=_arg(args, kwargs, 2, "axes", 2)
    ),
}
