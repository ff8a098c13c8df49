"""How to call one ``keras.ops`` function: its arguments by role, samples valid for it, the call.

An op entry's ``inputs`` are its positional arguments in call order, each a dict:

* ``kind``: ``tensor`` | ``python`` | ``list`` | ``tuple`` | ``varargs`` (the last three hold
  ``items``);
* ``param`` and ``role`` (``data``, ``index``, ``condition``, ``mask``, ``axis``, ``shape``,
  ``scalar``, ``matrix``, ``image``, ...);
* for tensors: ``shape``, ``dtype`` (``"probe"``: the probed dtype goes here; anything else is
  fixed, e.g. ``int32`` indices) and ``values``, a preset of :func:`values` that keeps the call in
  its domain (``positive`` for ``sqrt``, ``nonzero`` for divisors, ``square`` for ``inv``, ...);
* for Python values: ``value`` (``as_tuple`` turns a list back into a tuple).

The *probed* inputs are the tensors whose dtype is ``"probe"``, in call order (flattened out of
lists): a spec's ``input_dtypes`` are their dtypes, and a weak Python scalar
(``python_int``, ...) given for one of them is passed as a Python number.

>>> import numpy as np
>>> values("nonzero", (4,), "int32", np.random.default_rng(0)).all()
np.True_
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from dtype_explorer import dtypes
from dtype_explorer.errors import InvalidSpecError

#: The value presets an op's inputs use; every one stays in the op's domain in every dtype.
VALUE_PRESETS: dict[str, str] = {
    "default": "floats -2..2 on a 1/8 grid (exact in bfloat16 and float16); ints -2..2",
    "positive": "floats 0.5..2.5; ints 1..3 (sqrt, log, rsqrt, power bases)",
    "nonneg": "floats 0..2.5; ints 0..3",
    "nonzero": "+-(0.5..2.5) floats, +-(1..3) ints: never 0 (divisors)",
    "unit": "floats in (-0.875, 0.875) (arcsin, arccos, arctanh, erfinv); ints 0",
    "ge1": "floats 1.125..3 (arccosh); ints 1..3",
    "prob": "floats 0.125..0.875; ints 0..1",
    "probs_rows": "positive rows summing to 1 over the last axis",
    "one_hot": "one-hot rows over the last axis",
    "classes:N": "integer class ids 0..N-1",
    "smallint": "integers 0..3 (shift amounts, exponents)",
    "posint": "integers 1..6 (gcd, lcm)",
    "sorted": "strictly increasing along the last axis",
    "square": "diagonally dominant square matrices (invertible)",
    "spd": "symmetric positive definite matrices",
    "lower_tri": "lower triangular with a positive diagonal",
    "image01": "floats 0..1; ints 0..255",
    "complex": "complex values",
}


def _kind(dtype: str) -> str:
    if dtype == "bool":
        return "bool"
    if dtype.startswith("complex"):
        return "complex"
    if dtype.startswith("uint"):
        return "uint"
    if dtype.startswith("int"):
        return "int"
    return "float"


def _grid(x: Any, step: float) -> np.ndarray:
    return np.round(np.asarray(x) / step) * step


def values(preset: Any, shape: tuple[int, ...], dtype: str, rng: np.random.Generator) -> Any:
    """A NumPy array of ``dtype`` (a Keras name) following a value preset (:data:`VALUE_PRESETS`,
    or ``{"literal": [...]}``)."""
    kind = _kind(dtype)
    npdt = dtypes.numpy_dtype(dtype)  # ml_dtypes imported only for bfloat16/float8
    shape = tuple(shape)
    if dtype == "string":  # text, as a user holds it: the op (and the backend) decides
        return dtypes.words(shape, rng)
    if isinstance(preset, dict):
        return np.asarray(preset["literal"]).astype(npdt).reshape(shape)
    if preset == "default" and kind == "bool":
        return rng.integers(0, 2, size=shape).astype(bool)
    v = np.asarray(_drawn(preset, shape, kind, rng))
    if kind == "bool":
        return (
            v.astype(bool) if preset not in ("positive", "nonzero", "ge1") else np.ones(shape, bool)
        )
    if kind == "complex" and not np.iscomplexobj(v):
        v = v + 0j
    return v.astype(npdt)


def _drawn(preset: str, shape: tuple[int, ...], kind: str, rng: np.random.Generator) -> Any:
    """The preset's numbers for an input of this kind (``int``, ``uint``, ``float``, ...),
    drawn from ``rng`` in a fixed order (the same sample on every backend)."""
    is_int = kind in ("int", "uint")
    if preset.startswith("classes:"):
        return rng.integers(0, int(preset.split(":")[1]), size=shape).astype(np.float64)
    if preset == "smallint":
        return rng.integers(0, 4, size=shape).astype(np.float64)
    if preset == "posint":
        return rng.integers(1, 7, size=shape).astype(np.float64)
    if preset == "default":
        v = rng.integers(-2, 3, size=shape) if is_int else _grid(rng.uniform(-2, 2, shape), 1 / 8)
        return np.abs(v) if kind == "uint" else v
    if preset in ("positive", "nonneg", "ge1"):
        low, high, flow, fhigh = {
            "positive": (1, 4, 0.5, 2.5),
            "nonneg": (0, 4, 0.0, 2.5),
            "ge1": (1, 4, 1.125, 3.0),
        }[preset]
        if is_int:
            return rng.integers(low, high, size=shape)
        return _grid(rng.uniform(flow, fhigh, shape), 1 / 8)
    if preset == "nonzero":
        mag = (
            rng.integers(1, 4, size=shape) if is_int else _grid(rng.uniform(0.5, 2.5, shape), 1 / 8)
        )
        return mag * (1 if kind == "uint" else rng.choice([-1, 1], size=shape))
    if preset == "unit":
        return np.zeros(shape) if is_int else _grid(rng.uniform(-0.875, 0.875, shape), 1 / 8)
    if preset == "prob":
        if is_int:
            return rng.integers(0, 2, size=shape)
        return _grid(rng.uniform(0.125, 0.875, shape), 1 / 16)
    if preset in ("probs_rows", "one_hot", "sorted", "square", "spd", "lower_tri"):
        return _structured(preset, shape, kind, rng)
    if preset == "image01":
        if is_int:
            return rng.integers(0, 256, size=shape)
        return _grid(rng.uniform(0, 1, shape), 1 / 16)
    if preset == "complex":
        v = _grid(rng.uniform(-2, 2, shape), 1 / 8) + 1j * _grid(rng.uniform(-2, 2, shape), 1 / 8)
        return v if kind == "complex" else v.real
    raise ValueError(f"unknown value preset {preset!r}; valid: {', '.join(VALUE_PRESETS)}")


def _structured(preset: str, shape: tuple[int, ...], kind: str, rng: np.random.Generator) -> Any:
    """The presets with a structure along the last axes: rows of probabilities or one-hot
    rows, sorted rows, and square matrices (well conditioned, SPD, lower triangular)."""
    n = shape[-1]
    if preset in ("probs_rows", "one_hot"):
        if preset == "one_hot" or kind in ("int", "uint", "bool"):
            return np.eye(n)[rng.integers(0, n, size=shape[:-1])]
        w = rng.integers(1, 4, size=shape).astype(np.float64)
        return w / w.sum(-1, keepdims=True)
    if preset == "sorted":
        return np.cumsum(rng.integers(1, 3, size=shape), axis=-1) - (0 if kind == "uint" else 2)
    a = rng.integers(-1, 2, size=shape).astype(np.float64)
    if kind == "uint":
        a = np.abs(a)
    eye = np.eye(n)
    if preset == "square":
        return a + (n + 1) * eye
    if preset == "spd":
        return a @ np.swapaxes(a, -1, -2) + n * eye
    return np.tril(a, -1) + rng.integers(1, 3, size=shape) * eye


def python_scalar(preset: Any, weak: str) -> int | float | bool:
    """A weak Python scalar in the domain of ``preset`` (``2`` for most, ``1`` for shifts)."""
    if weak == "python_bool":
        return True
    kind = "int32" if weak == "python_int" else "float32"
    if isinstance(preset, dict) or preset in (
        "probs_rows",
        "one_hot",
        "square",
        "spd",
        "lower_tri",
        "sorted",
    ):
        preset = "positive"
    one = values(preset, (1,), kind, np.random.default_rng(1))
    number = one.reshape(-1)[0].item()
    if weak == "python_int":
        return int(number) if preset != "nonzero" or number != 0 else 1
    return float(number)


def probed(inputs: tuple[dict, ...]) -> list[dict]:
    """The tensor inputs that take the probed dtype, in call order."""
    found: list[dict] = []
    for spec in inputs:
        if spec["kind"] in ("list", "tuple", "varargs"):
            found.extend(probed(tuple(spec["items"])))
        elif spec["kind"] == "tensor" and spec["dtype"] == "probe":
            found.append(spec)
    return found


def tensors(inputs: tuple[dict, ...]) -> list[dict]:
    """Every tensor input of the op in call order, probed or fixed (``ops.take``: ``x`` and
    its int32 ``indices``): the arrays a user passes to the call."""
    found: list[dict] = []
    for spec in inputs:
        if spec["kind"] in ("list", "tuple", "varargs"):
            found.extend(tensors(tuple(spec["items"])))
        elif spec["kind"] == "tensor":
            found.append(spec)
    return found


def fixed(inputs: tuple[dict, ...]) -> list[dict]:
    """The tensor inputs of a fixed dtype (indices, masks, transforms), in call order: the
    catalog gives them unless the user's ``values`` carry every array input."""
    return [spec for spec in tensors(inputs) if spec["dtype"] != "probe"]


def all_given(inputs: tuple[dict, ...]) -> tuple[dict, ...]:
    """The op's inputs with every fixed tensor made a probed one, for a user whose ``values``
    carry every array input: each takes the user's value as given; ``"fixed"`` keeps the
    catalog's dtype (its role: a reference run keeps indices as they are).

    >>> [leaf["dtype"] for leaf in all_given(({"kind": "tensor", "dtype": "int32"},))]
    ['probe']
    """

    def one(spec: dict) -> dict:
        if spec["kind"] in ("list", "tuple", "varargs"):
            return {**spec, "items": [one(item) for item in spec["items"]]}
        if spec["kind"] == "tensor" and spec["dtype"] != "probe":
            return {**spec, "dtype": "probe", "fixed": spec["dtype"]}
        return spec

    return tuple(one(spec) for spec in inputs)


def build(
    inputs: tuple[dict, ...], make_tensor: Callable[[dict, int | None], Any]
) -> tuple[list[Any], dict[str, Any]]:
    """The positional arguments and the arguments by name; ``make_tensor(spec, i)`` makes each
    tensor (``i`` is its index among the probed inputs, ``None`` for a fixed-dtype one)."""
    named: dict[str, Any] = {}
    counter = [0]

    def one(spec: dict) -> Any:
        kind = spec["kind"]
        if kind == "tensor":
            index = None
            if spec["dtype"] == "probe":
                index, counter[0] = counter[0], counter[0] + 1
            value = make_tensor(spec, index)
        elif kind == "python":
            value = spec["value"]
            if spec.get("as_tuple") and isinstance(value, list):
                value = tuple(value)
        else:
            items = [one(item) for item in spec["items"]]
            value = tuple(items) if kind == "tuple" else items
        named[spec["param"].lstrip("*")] = value
        return value

    args: list[Any] = []
    for spec in inputs:
        value = one(spec)
        if spec["kind"] == "varargs":
            args.extend(value)
        else:
            args.append(value)
    return args, named


def _cg_square(x: Any) -> Any:
    def grad(*args: Any, upstream: Any = None) -> Any:
        if upstream is None:
            (upstream,) = args
        return upstream * 2 * x

    return x * x, grad


def _control_flow() -> dict[str, Callable[[Any, dict[str, Any]], Any]]:
    """The ops that take callables, called as the Keras docs show (no string is evaluated)."""
    return {
        "associative_scan": lambda ops, n: ops.associative_scan(lambda a, b: a + b, n["elems"]),
        "cond": lambda ops, n: ops.cond(n["pred"], lambda: n["x"] * 2, lambda: n["x"]),
        "custom_gradient": lambda ops, n: ops.custom_gradient(_cg_square)(n["x"]),
        "fori_loop": lambda ops, n: ops.fori_loop(0, 3, lambda i, v: v * 2, n["x"]),
        "jvp": lambda ops, n: ops.jvp(lambda a: ops.sin(a) * a, (n["x"],), (n["tangent"],)),
        "map": lambda ops, n: ops.map(lambda v: v * 2, n["x"]),
        "scan": lambda ops, n: ops.scan(lambda c, v: (c + v, c * v), n["init"], n["xs"]),
        "switch": lambda ops, n: ops.switch(1, [lambda v: v * 2, lambda v: v - 1], n["x"]),
        "vectorize": lambda ops, n: ops.vectorize(lambda a: a * 2)(n["x"]),
        "vectorized_map": lambda ops, n: ops.vectorized_map(lambda v: v * 2, n["x"]),
        "while_loop": lambda ops, n: ops.while_loop(
            lambda v: ops.sum(v) < 50, lambda v: v * 2, n["x"], maximum_iterations=6
        ),
    }


CONTROL_FLOW: frozenset[str] = frozenset(_control_flow())


def resolve(name: str) -> Callable[..., Any]:
    """``keras.ops.<...>`` for ``"ops.image.resize"``, ``"ops.nn.relu"``, ``"ops.add"``."""
    import keras

    found: Any = keras
    for part in name.split("."):
        found = getattr(found, part)
    return found


def call(name: str, args: list[Any], named: dict[str, Any], kwargs: dict[str, Any]) -> Any:
    """Call the op ``name`` (a catalog name) with built arguments; a keyword in ``kwargs``
    that names one of the catalog's positional arguments replaces it (:func:`bound`)."""
    function = name.rsplit(".", 1)[-1]
    if function in CONTROL_FLOW and name.count(".") == 1:
        from keras import ops

        return _control_flow()[function](ops, named)
    fn = resolve(name)
    args, kwargs = bound(fn, args, kwargs)
    return fn(*args, **kwargs)


def bound(
    fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]
) -> tuple[list[Any], dict[str, Any]]:
    """The call's positional and keyword arguments, the catalog's positional defaults bound
    to their parameters by name (``inspect.signature(fn).bind_partial``) and a user keyword
    replacing the default it names, never passed beside it: ``ops.eye`` with ``N=4`` is
    ``eye(4)``, not ``eye(3, N=4)``.

    >>> import keras
    >>> bound(keras.ops.eye, [3], {"N": 4, "dtype": "int8"})
    ([4], {'dtype': 'int8'})
    """
    if not kwargs or not args:
        return args, kwargs
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # no signature to bind by: the call as built
        return args, kwargs
    binding = signature.bind_partial(*args)
    clash = [key for key in kwargs if key in binding.arguments]
    if not clash:
        return args, kwargs
    for key in clash:
        if signature.parameters[key].kind is inspect.Parameter.VAR_POSITIONAL:
            raise InvalidSpecError(
                f"kwargs: {key!r} is {fn.__name__}'s *{key} (its positional inputs); give them "
                f"as values, not by name; received: kwargs[{key!r}]"
            )
        binding.arguments[key] = kwargs[key]
    rest = {key: value for key, value in kwargs.items() if key not in binding.arguments}
    return list(binding.args), {**binding.kwargs, **rest}


def probed_clashes(inputs: tuple[dict, ...], kwargs: dict[str, Any]) -> list[str]:
    """The keywords in ``kwargs`` that name a probed input of the op (one the spec gives a
    dtype or a value for): a user keyword may replace a fixed input, never the question."""
    params = {leaf["param"].lstrip("*") for leaf in probed(inputs)}
    params |= {
        leaf["param"].lstrip("*")
        for leaf in inputs
        if leaf["kind"] in ("list", "tuple", "varargs") and probed(tuple(leaf["items"]))
    }
    return [key for key in kwargs if key in params]
