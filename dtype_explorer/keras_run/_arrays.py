"""A tensor's values as NumPy, as ``keras.ops.convert_to_numpy`` gives them, without its copy
where the backend lends an immutable buffer: a TensorFlow eager tensor (its own buffer, as
``np.asarray`` reads it) and a jax array on the CPU (its buffer, which jax then does not let a
jitted function take over: a donation copies instead). Every other value (a torch tensor, which
code may change in place; a NumPy array; a variable; a sparse or symbolic tensor) goes through
``keras.ops.convert_to_numpy``, copied as Keras copies it.

An audit reads every leaf output, and each op's values, of the model and of its float32
reference: on a ResNet50, Keras's copies were tens of milliseconds an audit. A 0-d bfloat16
TensorFlow tensor (a loss, a sum), which Keras's conversion refuses ("object __array__ method
not producing an array"), is read through its buffer too. What is lent is
read-only here, so that nothing written into it can reach the tensor. Where values cannot be
read or checked, :func:`unread_values` words the numerics' note: this tool's failure, said as one.
:func:`one_value_fill` says, without computing it, that an OpenVINO tensor holds one value
throughout (a zero bias), which reading would have compiled.

>>> import keras, numpy as np
>>> x = keras.ops.ones((2, 3), "float16")
>>> a = numpy_values(x)
>>> a.dtype, a.shape, a.tolist() == keras.ops.convert_to_numpy(x).tolist()
(dtype('float16'), (2, 3), True)
>>> numpy_values(keras.ops.convert_to_tensor(3.0, "float16")).shape  # a 0-d tensor: a 0-d array
()
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def numpy_values(tensor: Any) -> np.ndarray:
    """``tensor``'s values as ``keras.ops.convert_to_numpy`` gives them (same dtype, shape and
    values), lent without a copy where the backend's tensor is immutable and on the host.

    Args:
        tensor: a backend tensor, a Keras variable, or anything ``convert_to_numpy`` takes.

    Returns:
        A NumPy array; read-only where it is lent.
    """
    import keras

    lent = _lent(tensor)
    if lent is None:
        return np.asarray(keras.ops.convert_to_numpy(tensor))
    lent = np.asarray(lent)  # a 0-d tensor's buffer comes as a NumPy scalar: a 0-d array
    lent.flags.writeable = False
    return lent


def abstract(tensor: Any) -> bool:
    """Whether ``tensor`` holds no values to read: a jax tracer, what a layer called inside a
    jax transformation is given and returns (a recurrent layer's cell, which Keras runs in
    ``jax.lax.scan``), whose conversion to NumPy raises.

    Args:
        tensor: a backend tensor, or anything else.

    Returns:
        Whether it is a tracer (``False`` for anything not of jax's).

    >>> abstract(np.ones(2))
    False
    """
    if not type(tensor).__module__.startswith("jax"):
        return False
    import jax

    return isinstance(tensor, jax.core.Tracer)


def _lent(tensor: Any) -> np.ndarray | None:
    """The buffer of an eager TensorFlow tensor or a host jax array, as a NumPy view; else
    ``None``."""
    kind = type(tensor)
    try:
        if kind.__name__ == "EagerTensor" and kind.__module__.startswith("tensorflow"):
            kind = tensor.dtype  # numbers and bools (float8 and int4 included), not strings
            if kind.is_floating or kind.is_integer or kind.is_complex or kind.is_bool:
                return tensor._numpy()  # what np.asarray(tensor) reads: the tensor's buffer
            return None
        jax = kind.__name__ == "ArrayImpl" and kind.__module__.startswith("jax")
        if (
            jax
            and tensor.is_fully_addressable
            and all(d.platform == "cpu" for d in tensor.devices())
        ):  # the CPU buffer itself, pinned while lent (a donation then copies instead)
            view = np.asarray(tensor)
            return None if view.dtype == object else view
    except Exception:  # an odd tensor: Keras's own conversion says what it holds
        return None
    return None


def one_value_fill(tensor: Any) -> bool:
    """Whether every value of ``tensor`` is known to be one and the same without computing
    it: an OpenVINO graph node that only fills a shape with one constant (``Broadcast``, in
    NumPy's mode, of a one-element ``Constant``: what Keras's ``ops.zeros``, ``ones`` and
    ``full`` make there, so a zero bias or a unit scale). Reading such a node's values makes
    Keras compile and infer a model with OpenVINO (10-20 ms each on the CPU plugin), and that
    plugin may change the value it reads back (a float32 subnormal flushed to zero, a 64-bit
    integer saturated to int32's range) but not its being one value. ``False`` for any other
    tensor, and wherever it is not known.

    Args:
        tensor: a backend tensor (a Keras variable's ``value``).

    Returns:
        Whether it is such a fill.

    >>> import keras
    >>> one_value_fill(keras.ops.zeros((2, 3)))  # not an OpenVINO node: not known here
    False
    """
    if type(tensor).__name__ != "OpenVINOKerasTensor":
        return False
    try:
        node = tensor.output.get_node()
        if node.get_type_name() != "Broadcast" or node.get_attributes().get("mode") != "numpy":
            return False
        value = node.input(0).get_source_output().get_node()
        return value.get_type_name() == "Constant" and math.prod(value.get_output_shape(0)) == 1
    except Exception:  # an odd node: not known
        return False


def unread_values(error: BaseException) -> str:
    """The numerics note where this tool failed to read or check a call's output values (the
    call itself returned): its own failure, said as one, never as the call's.

    Args:
        error: what the tool's reading or checking raised.

    Returns:
        The note, naming the error's class.

    >>> unread_values(ValueError("object __array__ method not producing an array"))
    'values not measured: dtype-explorer failed reading or checking them (ValueError)'
    """
    failed = type(error).__name__
    return f"values not measured: dtype-explorer failed reading or checking them ({failed})"
