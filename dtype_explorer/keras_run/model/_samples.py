"""A model's inputs and the sample an audit feeds it: built from its ``keras.Input``s, or the
user's checked against them, and the tensors of a pass described as ``TensorInfo`` records.

>>> import keras
>>> inputs = keras.Input((3,), dtype="uint8", name="pixels")
>>> model = keras.Model(inputs, keras.layers.Dense(2)(inputs))
>>> sample = sample_for(model, declared_inputs(model), None)
>>> sample.shape, sample.dtype.name
((2, 3), 'uint8')
>>> expected_inputs(declared_inputs(model))
'(batch, 3) uint8'
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dtype_explorer import dtypes, float_bits
from dtype_explorer.errors import InvalidSpecError, NeedsSample, received
from dtype_explorer.keras_run._arrays import numpy_values
from dtype_explorer.keras_run._spec import MAX_SAMPLE_ELEMENTS
from dtype_explorer.records import TensorInfo

#: Size given to dimensions a model leaves open (other than the batch, which is 2).
OPEN_DIM = 8
BATCH = 2


def keras_flatten(structure: Any) -> list[Any]:
    """The tensors in a nested structure (anything with a dtype and a shape)."""
    import keras

    return [t for t in keras.tree.flatten(structure) if hasattr(t, "dtype") and hasattr(t, "shape")]


def tensor_info(tensor: Any, values: bool = True) -> TensorInfo:
    """``tensor``'s dtype and shape, and whether its values are finite (``values``: read them;
    inside a compiled function they cannot be)."""
    shape = tuple(None if d is None else int(d) for d in tensor.shape)
    values = values and readable(tensor)
    finite = _finite(tensor) if values else None
    name = dtypes.describe(tensor)
    peak = _max_abs_integer(tensor) if values and dtypes.is_integer(name) else None
    return TensorInfo(dtype=name, shape=shape, finite=finite, max_abs=peak)


def readable(tensor: Any) -> bool:
    """Whether ``tensor``'s values can be read now: not a value being traced (a JAX tracer:
    an RNN's cell inside ``lax.scan``, any layer inside the jitted ``predict``; a TensorFlow
    graph tensor inside a ``tf.function``), whose dtype is all there is.

    >>> readable(np.ones(2))
    True
    """
    module = type(tensor).__module__
    if module.startswith("jax"):
        import jax

        return not isinstance(tensor, jax.core.Tracer)
    if module.startswith("tensorflow"):
        import tensorflow as tf

        return not tf.is_symbolic_tensor(tensor)
    return True


def _max_abs_integer(tensor: Any) -> float | None:
    """An integer tensor's largest magnitude (``precision-loss``); ``None`` when empty."""
    array = numpy_values(tensor)
    return float(np.max(np.abs(array.astype(np.float64)))) if array.size else None


def tensor_infos(
    structure: Any, values: bool = True, cache: dict[int, tuple[Any, TensorInfo]] | None = None
) -> tuple[TensorInfo, ...]:
    """:func:`tensor_info` of every tensor in a nested structure; ``cache`` (by ``id``, the
    tensor kept beside its info so that its id is not reused) reads each tensor's values once
    (one layer's output is the next one's given and received)."""
    if cache is None:
        return tuple(tensor_info(t, values) for t in keras_flatten(structure))
    found = []
    for t in keras_flatten(structure):
        hit = cache.get(id(t))
        if hit is None or hit[0] is not t:
            hit = cache[id(t)] = (t, tensor_info(t, values))
        found.append(hit[1])
    return tuple(found)


def nonfinite_count(tensor: Any) -> int:
    """How many inf/NaN values a float or complex tensor or array holds (0 for other dtypes).

    >>> nonfinite_count(np.array([1e300, np.inf]))   # float64 kept: 1e300 is finite there
    1
    """
    array = _float_values(tensor) if readable(tensor) else None
    return 0 if array is None else int(array.size - np.isfinite(array).sum())


def _finite(tensor: Any) -> bool | None:
    """Whether every value is finite; ``None`` for non-float tensors. Read as Keras holds it
    (``float_bits.finite_peak``: a 16-bit float through its bits, not widened; no temporary where
    every value is finite, most tensors); a mask only otherwise."""
    array = _float_array(tensor)
    if array is None:
        return None
    if array.dtype.kind == "c":
        return bool(np.isfinite(array).all())
    return float_bits.finite_peak(array) is not None


def _float_values(tensor: Any) -> np.ndarray | None:
    """A float or complex tensor's values as NumPy can test them (``float_bits.widened``: a
    16-bit float, bfloat16 included, as float32; float64 kept, so that no value overflows on
    the way), or ``None`` for other dtypes."""
    array = _float_array(tensor)
    return None if array is None else float_bits.widened(array)


def _float_array(tensor: Any) -> np.ndarray | None:
    """A float or complex tensor's values as NumPy, in its own dtype; ``None`` for other
    dtypes."""
    name = dtypes.describe(tensor)
    if not (dtypes.is_float(name) or name.startswith("complex")):
        return None
    return numpy_values(tensor)


def declared_inputs(model: Any) -> Any:
    """The model's ``keras.Input`` structure, or ``None`` when it declares none."""
    from keras.src.models.functional import Functional

    functional = getattr(model, "_functional", None) or model
    if isinstance(functional, Functional):
        return functional._inputs_struct
    return None


def functional_inputs(layer: Any) -> list[Any]:
    """The ``keras.Input`` tensors of a functional ``layer`` (none for any other layer)."""
    from keras.src.models.functional import Functional

    functional = getattr(layer, "_functional", None) or layer
    return list(functional.inputs) if isinstance(functional, Functional) else []


def sample_for(model: Any, inputs: Any, sample: Any) -> Any:
    """The user's sample checked against ``inputs``, or one built from them."""
    import keras

    if sample is None:
        if inputs is None:
            raise NeedsSample(f"{describe_model(model)} declares no inputs ({_undeclared(model)})")
        for spec in keras.tree.flatten(inputs):  # every size checked before one is built
            _sample_shape(model, spec)
        return keras.tree.map_structure(_make_sample, inputs)
    if inputs is None:
        return keras.tree.map_structure(_as_array, sample)
    expected = keras.tree.flatten(inputs)
    if isinstance(sample, list | tuple) and len(expected) == 1 and not _is_tensor_list(sample):
        sample = _as_array(sample)
    by_name = isinstance(sample, dict) and not isinstance(inputs, dict)
    if by_name:
        names = {spec.name for spec in expected}
        if set(sample) != names:
            raise InvalidSpecError(
                f"the sample does not fit: {describe_model(model)} takes "
                f"{expected_inputs(inputs)}, not a dict; a dict sample needs the input names "
                f"{sorted(names)} as its keys; "
                f"got keys {received(sorted(map(str, sample)))}"
            )
    elif isinstance(inputs, dict) != isinstance(sample, dict) and len(expected) > 1:
        raise InvalidSpecError(
            f"the sample does not fit: expected {expected_inputs(inputs)}; "
            f"got {sample_text(sample)}"
        )
    if isinstance(inputs, dict) and isinstance(sample, dict) and set(inputs) != set(sample):
        raise InvalidSpecError(
            f"the sample does not fit: expected keys {sorted(inputs)}; got {sorted(sample)}"
        )
    if by_name:  # Keras routes a dict to a functional model's inputs by name, not sorted keys
        leaves = [_as_array(sample[spec.name]) for spec in expected]
        sample = keras.tree.pack_sequence_as(inputs, leaves)  # each row pairs by name
    else:
        leaves = keras.tree.flatten(keras.tree.map_structure(_as_array, sample))
    if len(leaves) != len(expected):
        raise InvalidSpecError(
            f"the sample does not fit: the model takes {len(expected)} input(s), "
            f"{expected_inputs(inputs)}; got {len(leaves)}: {sample_text(sample)}"
        )
    for leaf, spec in zip(leaves, expected, strict=True):
        if not _fits(tuple(leaf.shape), tuple(spec.shape)):
            raise InvalidSpecError(
                f"the sample does not fit input '{spec.name}': expected shape "
                f"{_shape_text(spec.shape)} ({spec.dtype}); "
                f"got {tuple(leaf.shape)} ({dtypes.describe(leaf)})"
            )
    return keras.tree.map_structure(_as_array, sample)


def _shape(spec: Any) -> tuple[int, ...]:
    """The shape of the sample built for one ``keras.Input``: its open batch :data:`BATCH`,
    any other open dimension :data:`OPEN_DIM`."""
    return tuple(
        BATCH if i == 0 and d is None else OPEN_DIM if d is None else int(d)
        for i, d in enumerate(spec.shape)
    )


def _sample_shape(model: Any, spec: Any) -> tuple[int, ...]:
    """:func:`_shape`, refused where it holds more than ``MAX_SAMPLE_ELEMENTS`` (a probe's
    limit too: samples are probes, not workloads), before anything is built.

    >>> import keras
    >>> _sample_shape(None, keras.Input((3,)))
    (2, 3)
    >>> try:
    ...     _sample_shape(keras.Model(name="m"), keras.Input((100000, 100000)))
    ... except InvalidSpecError as error:
    ...     print(str(error).split(": ", 1)[1].split(". ")[0])
    a sample of it, (2, 100000, 100000), holds 20000000000 elements; the limit is 4194304
    """
    shape = _shape(spec)
    size = math.prod(shape)
    if size > MAX_SAMPLE_ELEMENTS:
        raise InvalidSpecError(
            f"keras.Input '{spec.name}' of {describe_model(model)} declares shape "
            f"{_shape_text(spec.shape)}: a sample of it, {shape}, holds {size} elements; the "
            f"limit is {MAX_SAMPLE_ELEMENTS}. Pass a sample: check_model(model, sample=x) or "
            "%dtype_check model --sample x"
        )
    return shape


def _make_sample(spec: Any) -> Any:
    """A sample for one ``keras.Input``, a NumPy array in its dtype: strings as a NumPy
    unicode array, as ``model(...)`` takes them beside NumPy numbers (a backend string tensor
    beside NumPy arrays is refused: "cannot mix tensors and non-tensors")."""
    array = dtypes.sample(spec.dtype, _shape(spec))
    if spec.dtype == "string":
        return np.asarray(array.tolist(), dtype=str)
    return np.abs(array) if dtypes.is_integer(spec.dtype) else array


def _as_array(value: Any) -> Any:
    if hasattr(value, "dtype") and hasattr(value, "shape"):
        return value
    if hasattr(value, "element_spec") and hasattr(value, "take"):  # a tf.data.Dataset
        raise InvalidSpecError(
            "the sample is a tf.data.Dataset; check_model audits one batch as the model gets "
            "it: pass one, x, y = next(iter(dataset)); check_model(model, x) (mode='fit': "
            "labels=y), and mode='dataset' runs model.predict on a tf.data.Dataset of it. "
            f"Received: {type(value).__name__}"
        )
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as error:
        raise InvalidSpecError(
            f"the sample must hold arrays or tensors; got {type(value).__name__}"
        ) from error
    if array.dtype.kind not in "biufcUS" and not dtypes.is_text_array(array):  # objects, dates
        raise InvalidSpecError(
            f"the sample must hold numeric or string arrays or tensors; got "
            f"{type(value).__name__} {received(value)}"
        )
    return array


def _is_tensor_list(sample: Any) -> bool:
    return all(hasattr(x, "dtype") and hasattr(x, "shape") for x in sample)


def _fits(shape: tuple, expected: tuple) -> bool:
    return len(shape) == len(expected) and all(
        e is None or int(s) == e for s, e in zip(shape, expected, strict=True)
    )


def as_dataset(sample: Any, batch: int) -> Any:
    """``sample`` as a ``tf.data.Dataset`` of batches of ``batch``, each element as Keras's
    ``predict`` and ``fit`` read one (``x``, or ``(x, y)``): one array as it is, a dict of named
    inputs as a dict, a list of inputs as one tuple inside a 1-tuple (a bare 2-tuple would be
    read as ``(x, y)``).

    >>> import numpy as np
    >>> data = as_dataset([np.ones((2, 3)), np.zeros((2, 1), "int32")], 2)
    >>> [t.dtype.name for t in next(iter(data))[0]]
    ['float64', 'int32']
    """
    import tensorflow as tf

    if isinstance(sample, dict):
        element = sample
    elif isinstance(sample, (list, tuple)):
        element = (tuple(sample),)
    else:
        element = sample
    return tf.data.Dataset.from_tensor_slices(element).batch(batch)


def describe_model(model: Any) -> str:
    """``Functional 'name'``: a model or layer as messages name it."""
    return f"{type(model).__name__} '{model.name}'"


def _undeclared(model: Any) -> str:
    """What kind of model declares no inputs: a Sequential without a ``keras.Input``, never
    built; a subclassed model; a layer (by class name: a Keras 2 model's classes are
    tf_keras's)."""
    kinds = {c.__name__ for c in type(model).__mro__}
    if "Sequential" in kinds:
        return "a Sequential with no keras.Input, not built yet"
    return "a subclassed model" if "Model" in kinds else "a layer, not a model"


def expected_inputs(inputs: Any) -> str:
    """The inputs a model declares (``keras.Input``s), as messages show them."""
    import keras

    if isinstance(inputs, dict):
        return (
            "{"
            + ", ".join(f"{k!r}: {_shape_text(v.shape)} {v.dtype}" for k, v in inputs.items())
            + "}"
        )
    return ", ".join(f"{_shape_text(t.shape)} {t.dtype}" for t in keras.tree.flatten(inputs))


def sample_text(sample: Any) -> str:
    """A sample's shapes and dtypes, as messages show them."""
    import keras

    try:
        leaves = keras.tree.flatten(sample)
        return ", ".join(
            f"{tuple(x.shape)} {dtypes.describe(x)}" if hasattr(x, "shape") else type(x).__name__
            for x in leaves
        )
    except Exception:
        return type(sample).__name__


def _shape_text(shape: tuple) -> str:
    return (
        "("
        + ", ".join(
            "batch" if i == 0 and d is None else "?" if d is None else str(d)
            for i, d in enumerate(shape)
        )
        + ")"
    )
