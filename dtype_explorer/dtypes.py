"""The dtype vocabulary, and sample arrays for every Keras dtype.

The names come from Keras itself (``keras.src.backend.common.dtypes``); bfloat16 and the
float8 types are made with ``ml_dtypes``, imported only where one of them is really built or
measured (:func:`ml_type`): a cached answer never imports it (~0.4 s of CPU with ml_dtypes
0.7). Python scalars enter as *weak* types: ``"python_int"``, ``"python_float"`` and
``"python_bool"``.

>>> sample("uint8", (2, 3), preset="image").dtype
dtype('uint8')
"""

from __future__ import annotations

import functools
import importlib

import numpy as np

from dtype_explorer import keras_facts
from dtype_explorer.errors import InvalidSpecError, received, unknown

PYTHON_SCALARS: dict[str, type] = {"python_int": int, "python_float": float, "python_bool": bool}
#: Every dtype name, by family: the one table the package (and the widget's colours) use.
#: A test checks it against Keras's ``ALLOWED_DTYPES``.
FAMILIES: dict[str, tuple[str, ...]] = {
    "bool": ("bool",),
    "uint": ("uint8", "uint16", "uint32", "uint64"),
    "int": ("int8", "int16", "int32", "int64"),
    "float": ("bfloat16", "float16", "float32", "float64"),
    "float8": ("float8_e4m3fn", "float8_e5m2"),
    "complex": ("complex64", "complex128"),
    "string": ("string",),
    "python": tuple(PYTHON_SCALARS),
}
_FAMILY_OF = {name: family for family, members in FAMILIES.items() for name in members}
#: The dtypes ``keras.config.set_floatx`` accepts.
FLOATX: tuple[str, ...] = ("float16", "bfloat16", "float32", "float64")
PRESETS: dict[str, str] = {
    "default": "small values of both signs (non-negative for unsigned types)",
    "image": "pixel values 0..255, as from an image file",
    "large": "magnitudes around 1e5, beyond float16's maximum of 65504",
    "tiny": "magnitudes around 1e-6, below float16's normal range",
    "edge": "edge values in turn: 0, -1 (1 for unsigned), the dtype's max and min",
}
#: The Keras dtypes NumPy has no type for: ``ml_dtypes`` makes them (:func:`ml_type`).
ML_DTYPES: tuple[str, ...] = ("bfloat16", "float8_e4m3fn", "float8_e5m2")


def ml_type(name: str) -> type:
    """The ``ml_dtypes`` scalar type of ``name`` (one of :data:`ML_DTYPES`), importing
    ``ml_dtypes`` now: only where such an array is really built or measured.

    Args:
        name: ``"bfloat16"``, ``"float8_e4m3fn"`` or ``"float8_e5m2"``.

    Returns:
        The scalar type, e.g. ``ml_dtypes.bfloat16``.

    >>> ml_type("bfloat16").__name__
    'bfloat16'
    """
    if name not in ML_DTYPES:
        raise unknown("ml_dtypes type", name, ML_DTYPES)
    return getattr(importlib.import_module("ml_dtypes"), name)


def _info(name: str):
    """``finfo``/``iinfo`` of a numeric dtype: NumPy's for its own types, ``ml_dtypes``'s (imported
    here) for bfloat16 and the float8 types."""
    if name in ML_DTYPES:
        return importlib.import_module("ml_dtypes").finfo(ml_type(name))
    kind = np.dtype(name)
    return np.iinfo(kind) if kind.kind in "iu" else np.finfo(kind)


@functools.cache
def keras_dtypes() -> tuple[str, ...]:
    """Every dtype name Keras allows (``ALLOWED_DTYPES``), in Keras's order, read from the
    snapshot of the installed Keras (``keras_facts``: Keras is not imported here)."""
    return keras_facts.allowed_dtypes()


def all_input_dtypes() -> tuple[str, ...]:
    """Every dtype a sample can be made for: Keras's dtypes plus weak Python scalars."""
    return keras_dtypes() + tuple(PYTHON_SCALARS)


def family(name: str | None) -> str:
    """The family of a dtype name (a key of :data:`FAMILIES`), ``"other"`` for anything else.

    >>> family("bfloat16"), family("uint8"), family("python_float"), family(None)
    ('float', 'uint', 'python', 'other')
    """
    return _FAMILY_OF.get(name or "", "other")


def is_float(name: str) -> bool:
    """A real floating-point dtype (float8 included) or a weak Python float."""
    return family(name) in ("float", "float8") or name == "python_float"


def is_integer(name: str) -> bool:
    """A signed or unsigned integer dtype, or a weak Python int."""
    return family(name) in ("int", "uint") or name == "python_int"


@functools.cache
def bits(name: str) -> int | None:
    """The bit width of a numeric dtype (``finfo``/``iinfo``; a complex number counts
    both parts); ``None`` for bool, string and the weak Python scalars.

    >>> bits("bfloat16"), bits("float8_e5m2"), bits("uint16"), bits("complex64"), bits("bool")
    (16, 8, 16, 64, None)
    """
    kind = family(name)
    if kind in ("float", "float8", "int", "uint"):
        return int(_info(name).bits)
    if kind == "complex":
        return numpy_dtype(name).itemsize * 8
    return None


def narrows(source: str, target: str) -> bool:
    """A float-to-float cast that loses bits (``float64 -> float32``, ``float32 -> bfloat16``).

    >>> narrows("float64", "float32"), narrows("float16", "bfloat16"), narrows("int8", "float16")
    (True, False, False)
    """
    if not (is_float(source) and is_float(target)):
        return False
    wide, narrow = bits(source) or 64, bits(target) or 64  # a weak Python float is a double
    return narrow < wide


def validate(name: str) -> str:
    """Return ``name`` if it is a dtype a sample can be made for, else a helpful error."""
    if not isinstance(name, str) or name not in all_input_dtypes():
        raise unknown("dtype", name, all_input_dtypes())
    return name


def standardize(value: object, parameter: str = "input_dtype") -> str:
    """A dtype name from what people pass for one, the way ``keras.backend.standardize_dtype``
    reads it: a name (``"float32"``), a NumPy or ml_dtypes type or dtype (``np.float32``,
    ``np.dtype("float16")``, ``ml_dtypes.bfloat16``), a TensorFlow or JAX dtype (by its
    ``name``/``__name__``) or a torch dtype (``torch.float32``, by its text). Python's own
    ``int``/``float``/``bool`` are refused: say ``"int64"`` for an array or ``"python_int"`` for
    a weak scalar. Raises ``InvalidSpecError`` naming ``parameter``, what was received and what
    is valid.

    >>> import ml_dtypes
    >>> standardize(np.float32), standardize(np.dtype("uint8")), standardize(ml_dtypes.bfloat16)
    ('float32', 'uint8', 'bfloat16')
    >>> standardize("FLOAT32")
    Traceback (most recent call last):
    ...
    dtype_explorer.errors.InvalidSpecError: input_dtype: unknown dtype 'FLOAT32'; did you ...
    """
    name: object = value
    for python_type, meant in _PYTHON_TYPES.items():
        if value is python_type:
            raise InvalidSpecError(
                f"{parameter}: the Python type {python_type.__name__} is ambiguous here; "
                f"pass a dtype name: {meant}"
            )
    if not isinstance(value, str):
        if isinstance(getattr(value, "name", None), str):
            name = value.name  # type: ignore[union-attr]
        elif isinstance(getattr(value, "__name__", None), str):
            name = value.__name__  # type: ignore[union-attr]
        elif type(value).__module__ == "torch":
            name = str(value).rsplit(".", 1)[-1]
        else:
            raise InvalidSpecError(
                f"{parameter} must be a dtype name such as 'float32' (or a NumPy, ml_dtypes, "
                f"JAX, TensorFlow or torch dtype); received: {received(value)} "
                f"of type {type(value).__name__}"
            )
    try:
        return validate(name)  # type: ignore[arg-type]
    except InvalidSpecError as error:
        raise InvalidSpecError(f"{parameter}: {error}") from None


#: Python's own types, refused as dtypes: what to pass instead.
_PYTHON_TYPES: dict[type, str] = {
    bool: "'bool' (an array) or 'python_bool' (a weak Python scalar)",
    int: "'int64', 'int32', ... (an array) or 'python_int' (a weak Python scalar)",
    float: "'float32', 'float64', ... (an array) or 'python_float' (a weak Python scalar)",
    complex: "'complex64' or 'complex128'",
    str: "'string'",
}


def numpy_dtype(name: str) -> np.dtype:
    """The NumPy dtype holding samples of a Keras dtype (``string`` becomes ``object``)."""
    if name in ML_DTYPES:
        return np.dtype(ml_type(name))
    if name == "string":
        return np.dtype(object)
    return np.dtype(name)


def words(shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """A sample of Keras's ``string`` dtype: a NumPy array of words (``object``), as a user
    holds text, drawn from ``rng``."""
    chosen = np.array(["red", "green", "blue", "cyan"], dtype=object)
    return chosen[rng.integers(0, len(chosen), size=shape)]


def sample(
    name: str, shape: tuple[int, ...], *, preset: str = "default", seed: int = 0
) -> np.ndarray | int | float | bool:
    """A deterministic sample of dtype ``name``; a Python scalar for the weak types."""
    validate(name)
    if preset not in PRESETS:
        raise unknown("value preset", preset, PRESETS)
    rng = np.random.default_rng(seed)
    if name in PYTHON_SCALARS:
        return PYTHON_SCALARS[name](_scalar(preset))
    if name == "string":
        return words(shape, rng)
    if name == "bool":
        return rng.integers(0, 2, size=shape).astype(bool)
    if preset == "edge":
        return _edge(name, shape)
    values = _values(rng, shape, preset, unsigned=name.startswith("uint"))
    if is_integer(name):
        info = np.iinfo(np.dtype(name))
        values = np.clip(np.round(values), info.min, info.max)
    if name.startswith("complex"):
        values = values + 1j * _values(rng, shape, preset, unsigned=False)
    with np.errstate(over="ignore", invalid="ignore"):  # "large" overflows float16 on purpose
        return values.astype(numpy_dtype(name))


def _values(rng: np.random.Generator, shape, preset: str, *, unsigned: bool) -> np.ndarray:
    if preset == "image":
        return rng.integers(0, 256, size=shape).astype(np.float64)
    scale = {"default": 3.0, "large": 1e5, "tiny": 1e-6}[preset]
    low = 0.0 if unsigned else -scale
    return rng.uniform(low, scale, size=shape)


def _scalar(preset: str) -> float:
    return {"default": 2.0, "image": 255.0, "large": 1e5, "tiny": 1e-6, "edge": 0.0}[preset]


def _edge(name: str, shape: tuple[int, ...]) -> np.ndarray:
    """0, -1 (1 when unsigned), max and min of ``name``, repeated over ``shape``.

    >>> _edge("int8", (5,)).tolist()
    [0, -1, 127, -128, 0]
    """
    kind = numpy_dtype(name)
    info = _info(name if family(name) != "complex" else "float32")
    cycle = np.array([0, 1 if name.startswith("uint") else -1, info.max, info.min], dtype=object)
    flat = np.resize(cycle, int(np.prod(shape)))
    return flat.astype(kind).reshape(shape)


def describe(value: object) -> str:
    """The dtype name of a sample or tensor as Keras standardises it."""
    if isinstance(value, bool):
        return "python_bool"
    if isinstance(value, int):
        return "python_int"
    if isinstance(value, float):
        return "python_float"
    if isinstance(value, np.ndarray) and (value.dtype.kind in "US" or is_text_array(value)):
        return "string"  # a NumPy text array: the string tensor Keras makes of it
    return keras_name(value.dtype)


def keras_name(dtype: object) -> str:
    """``keras.backend.standardize_dtype(dtype)``, remembered per dtype object (a NumPy, jax,
    TensorFlow or torch dtype): Keras names one in Python at each call (8-9 us, through NumPy's
    ``dtype.name``), and an audit names the same few dtypes thousands of times. Named each time:
    ``None``, a name and a type (``int``, ``np.float32``), whose answer may follow the process's
    Keras settings (``None`` is ``floatx``), and an unhashable ``dtype``. Whatever Keras raises
    is raised.

    >>> keras_name(np.dtype("float16")), keras_name("float32")
    ('float16', 'float32')
    """
    if dtype is not None and not isinstance(dtype, str | type):
        try:
            return _keras_names(dtype)
        except TypeError:  # unhashable (or Keras's own TypeError: raised again below)
            pass
    from keras import backend

    return backend.standardize_dtype(dtype)


@functools.lru_cache(maxsize=1024, typed=True)  # typed: float == np.dtype('float64')
def _keras_names(dtype: object) -> str:
    from keras import backend

    return backend.standardize_dtype(dtype)


def is_text_array(value: object) -> bool:
    """Whether ``value`` is a NumPy object array holding only ``str`` / ``bytes``.

    >>> is_text_array(np.array(["a", b"b"], dtype=object)), is_text_array(np.array([1.0]))
    (True, False)
    """
    return (
        isinstance(value, np.ndarray)
        and value.dtype.kind == "O"
        and value.size > 0
        and all(isinstance(x, str | bytes) for x in value.flat)
    )


@functools.cache
def half_floats() -> tuple[str, ...]:
    """The 16-bit floats (float16, bfloat16): what a mixed policy computes in, and what the
    audit's retry casts to float32. Read from :data:`FAMILIES`, the one owner of the dtype
    names, at first use (their widths import ``ml_dtypes``); ``dtypes.HALF`` is the same.

    Returns:
        The names, in :data:`FAMILIES`' order.

    >>> half_floats()
    ('bfloat16', 'float16')
    """
    return tuple(d for d in FAMILIES["float"] if bits(d) == 16)


def __getattr__(name: str) -> object:
    """``HALF``: :func:`half_floats`, computed at first use, not at import."""
    if name == "HALF":
        return half_floats()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "FAMILIES",
    "FLOATX",
    "ML_DTYPES",
    "PRESETS",
    "PYTHON_SCALARS",
    "TOLERANCE_ULPS",
    "InvalidSpecError",
    "all_input_dtypes",
    "bits",
    "describe",
    "exact_integers",
    "family",
    "float_limits",
    "half_floats",
    "int_range",
    "is_float",
    "is_integer",
    "is_text_array",
    "keras_dtypes",
    "ml_type",
    "narrows",
    "numpy_dtype",
    "sample",
    "standardize",
    "tolerance",
    "validate",
]


#: How many units in the last place (at 1.0) two results in one dtype may differ by and still
#: agree: backends sum in different orders, so float results agree to a few ulps, not exactly.
TOLERANCE_ULPS = 16


def tolerance(name: str | None) -> float:
    """The relative difference (to the values' scale) two results in dtype ``name`` may show and
    still agree: :data:`TOLERANCE_ULPS` times its epsilon; ``0.0`` for integers and bool (exact).

    >>> tolerance("float16"), tolerance("int8"), tolerance("float32") < 1e-5
    (0.015625, 0.0, True)
    """
    kind = family(name)
    if kind in ("float", "float8"):
        return TOLERANCE_ULPS * float(_info(str(name)).eps)
    if kind == "complex":
        part = "float32" if name == "complex64" else "float64"
        return TOLERANCE_ULPS * float(_info(part).eps)
    if name == "python_float":
        return TOLERANCE_ULPS * float(np.finfo(np.float64).eps)
    return 0.0


def exact_integers(name: str | None) -> int | None:
    """The largest magnitude up to which a float dtype holds every integer exactly (its
    significand's ``2 ** (nmant + 1)``); ``None`` for any other dtype.

    >>> exact_integers("float16"), exact_integers("bfloat16"), exact_integers("int32")
    (2048, 256, None)
    """
    if family(name) != "float":
        return None
    return 2 ** (int(_info(str(name)).nmant) + 1)


def int_range(name: str | None) -> tuple[int, int] | None:
    """The smallest and largest value of an integer dtype; ``None`` for any other dtype.

    >>> int_range("uint8"), int_range("int8"), int_range("float32")
    ((0, 255), (-128, 127), None)
    """
    if family(name) not in ("int", "uint"):
        return None
    info = _info(str(name))
    return int(info.min), int(info.max)


def float_limits(name: str) -> tuple[float, float]:
    """A float dtype's largest finite value and smallest normal (headroom's two ends).

    >>> float_limits("float16")
    (65504.0, 6.103515625e-05)
    """
    info = _info(name)
    return float(info.max), float(info.smallest_normal)


def smallest_subnormal(name: str) -> float:
    """A float dtype's smallest non-zero magnitude: below half of it a value rounds to zero.

    >>> smallest_subnormal("float16")
    5.960464477539063e-08
    """
    return float(_info(name).smallest_subnormal)
