"""The user's own values (``values=`` given arrays, nested lists, Python numbers, or dicts and
tuples of them), checked and turned into data that travels: ``InputValue`` leaves and the
structure they nest in; and back, in the probing process, into what the target is called with.

What a value becomes:

* a NumPy array, or anything ``np.asarray`` takes (a backend tensor, a NumPy scalar), is an
  array of its own dtype; a nested list of numbers, bools or strings is an array too
  (``np.asarray``'s dtype: int64, float64, bool, string);
* a Python ``int``, ``float`` or ``bool`` stays a Python number (a weak ``python_int``, ...),
  passed to Keras exactly as given;
* a ``dict`` (string keys) or a ``tuple`` nests; so does a ``list`` holding arrays, dicts or
  tuples. The target gets that structure exactly as given, and every leaf has its cast path.

``input_dtype`` left out (``None``), each leaf keeps its own dtype. Given, it converts the
leaves: one dtype for all, or one per leaf. A conversion must hold every value exactly
(``-1``, ``300`` or ``1.5`` as ``uint8``, ``2909`` as ``bfloat16`` (``2912``), ``2049`` as
``float16`` or ``0.1`` as ``float32`` is refused, naming the element; a finite float that
overflows to inf too). A Python number asked as an array dtype becomes a 0-d array of it.
A converted leaf remembers its own dtype (``given_dtype``: the cast path's ``given`` step); a
nested list given with no ``input_dtype`` is passed to an op as the list it is.

>>> given = user_values([[2, 3], [-1, -2]], ["int32", "int32"])
>>> given.dtypes, given.shapes, given.structure
(('int32', 'int32'), ((2,), (2,)), None)
>>> user_values([np.float64(5e-324)], None).dtypes
('float64',)
>>> user_values([{"images": np.zeros((1, 4, 4, 3), "float32"),
...               "segmentation_masks": np.zeros((1, 4, 4, 1), "int32")}], None).structure
[{'dict': [['images', 0], ['segmentation_masks', 1]]}]
>>> user_values([[300]], "uint8")
Traceback (most recent call last):
...
dtype_explorer.errors.InvalidSpecError: values[0]: element [0] = 300 (int64) becomes 44 as ...
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dtype_explorer import dtypes
from dtype_explorer.errors import InvalidSpecError, received
from dtype_explorer.keras_run._arrays import numpy_values
from dtype_explorer.records import MAX_VALUE_ELEMENTS, MAX_VALUES_BYTES, InputValue

#: The most leaves a probe's values may hold, and how deeply they may nest.
MAX_LEAVES = 64
MAX_DEPTH = 8


@dataclass(frozen=True)
class GivenValues:
    """The user's values as data: the leaves, their dtypes and shapes (``()`` for a Python
    number), how they nest (``None``: input ``i`` is leaf ``i``), the number of inputs, and
    each leaf's path from its input (``(input, key, ...)``)."""

    leaves: tuple[InputValue, ...]
    dtypes: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    structure: list | None
    inputs: int
    paths: tuple[tuple[Any, ...], ...]


def user_values(values: Any, input_dtype: Any) -> GivenValues:
    """Check the user's ``values`` (one per input: a list or tuple of them, or one array or
    dict for a target with one input) against ``input_dtype`` (``None``: their own dtypes; a
    name for all leaves; one name per leaf) and make them data.

    Args:
        values: one value per input (see the module's docstring for what a value may be).
        input_dtype: ``None``, a dtype name, or a list of names, one per leaf.

    Returns:
        A ``GivenValues``.

    Raises:
        InvalidSpecError: a value that cannot travel as data (an object array, a ragged list,
            a function), too big (more than ``MAX_VALUE_ELEMENTS`` elements in an array or
            ``MAX_VALUES_BYTES`` in all), or not held exactly by the dtype asked.
    """
    top = list(values) if isinstance(values, list | tuple) else [values]
    if not top:
        raise InvalidSpecError("values: give one value per input; received: an empty list")
    raw: list[tuple[tuple[Any, ...], Any]] = []
    nodes = [_node(v, (i,), raw, 0) for i, v in enumerate(top)]
    if not raw:
        raise InvalidSpecError(
            f"values: holds no array or number; received: {received(values)} "
            f"({type(values).__name__}); give one value per input (an array, a nested list, "
            "a Python number, or a dict or tuple of them for a structured input)"
        )
    asked = _asked(input_dtype, len(raw))
    leaves = tuple(_leaf(v, a, path) for (path, v), a in zip(raw, asked))
    total = sum(leaf.nbytes for leaf in leaves)
    if total > MAX_VALUES_BYTES:
        raise InvalidSpecError(
            f"values hold {total} bytes in all; the limit is {MAX_VALUES_BYTES} (values are a "
            "probe's question, not a workload: a few examples show a dtype)"
        )
    flat = all(isinstance(n, int) for n in nodes)
    return GivenValues(
        leaves=leaves,
        dtypes=tuple(leaf.dtype for leaf in leaves),
        shapes=tuple(leaf.shape for leaf in leaves),
        structure=None if flat else nodes,
        inputs=len(nodes),
        paths=tuple(path for path, _ in raw),
    )


def _node(value: Any, path: tuple[Any, ...], raw: list, depth: int) -> Any:
    """The structure node of ``value``; its leaves appended to ``raw``."""
    if depth > MAX_DEPTH:
        raise InvalidSpecError(f"values{_where(path)}: nest deeper than {MAX_DEPTH} levels")
    if isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                raise InvalidSpecError(
                    f"values{_where(path)}: dict keys are strings (input names); received: "
                    f"{received(key)} ({type(key).__name__})"
                )
        return {"dict": [[k, _node(v, (*path, k), raw, depth + 1)] for k, v in value.items()]}
    if isinstance(value, list):
        _check_list_size(value, _where(path))
    if isinstance(value, tuple) or (isinstance(value, list) and _nests(value)):
        kind = "tuple" if isinstance(value, tuple) else "list"
        return {kind: [_node(v, (*path, j), raw, depth + 1) for j, v in enumerate(value)]}
    if len(raw) >= MAX_LEAVES:
        raise InvalidSpecError(f"values hold more than {MAX_LEAVES} arrays and numbers")
    raw.append((path, value))
    return len(raw) - 1


def _nests(items: list) -> bool:
    """A list that holds arrays, tensors, dicts or tuples is a structure, not a nested list."""
    return any(
        isinstance(item, dict | tuple)
        or (isinstance(item, list) and _nests(item))
        or not isinstance(item, list | bool | int | float | complex | str | np.generic)
        for item in items
    )


def _asked(input_dtype: Any, count: int) -> list[str | None]:
    if input_dtype is None:
        return [None] * count
    if isinstance(input_dtype, list | tuple):
        if len(input_dtype) == 1:
            return [dtypes.standardize(input_dtype[0], "input_dtype")] * count
        if len(input_dtype) != count:
            raise InvalidSpecError(
                f"input_dtype: {len(input_dtype)} dtypes given for {count} values; give one "
                "dtype for all values, one per value, or none (each value's own dtype)"
            )
        return [dtypes.standardize(d, "input_dtype") for d in input_dtype]
    return [dtypes.standardize(input_dtype, "input_dtype")] * count


def _leaf(value: Any, asked: str | None, path: tuple[Any, ...]) -> InputValue:
    where = _where(path)
    python = isinstance(value, bool | int | float) and not isinstance(value, np.generic)
    if python and (asked is None or asked in dtypes.PYTHON_SCALARS):
        return InputValue.of_python(_python(value, asked or _weak(value), where))
    if asked in dtypes.PYTHON_SCALARS:
        raise InvalidSpecError(
            f"values{where}: {asked} is a Python number, and this value is not one; received: "
            f"{received(value)} ({type(value).__name__})"
        )
    if isinstance(value, bytes | bytearray | memoryview):
        raise InvalidSpecError(
            f"values{where}: bytes are not a value (they are never unpickled or decoded); "
            f"received: {received(bytes(value)[:200])} ({type(value).__name__} of "
            f"{len(bytes(value))} bytes); give an array, a nested list of numbers, bools or "
            "strings, or a Python number"
        )
    if isinstance(value, str):
        raise InvalidSpecError(
            f"values{where}: a bare string is not a value (a value preset is named by "
            f"values='default', ...); give a list of strings for a string input; received: "
            f"{received(value)}"
        )
    array = _array(value, where)
    own = _own_dtype(array)
    if asked is not None and asked != own:
        given = _weak(value) if python else own
        return InputValue.of_array(_converted(array, asked, where), given_dtype=given)
    return InputValue.of_array(array, listed=isinstance(value, list))


def _weak(value: bool | int | float) -> str:
    return f"python_{type(value).__name__}"


def _python(value: bool | int | float, asked: str, where: str) -> bool | int | float:
    wanted = dtypes.PYTHON_SCALARS[asked]
    if wanted is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if wanted is int and isinstance(value, int) and not isinstance(value, bool):
        if len(str(abs(value))) > 100:
            raise InvalidSpecError(f"values{where}: a Python int of more than 100 digits")
        return value
    if not isinstance(value, wanted) or (wanted is int and isinstance(value, bool)):
        raise InvalidSpecError(
            f"values{where}: {asked} asked, but the value is a {type(value).__name__}; "
            f"received: {received(value)}"
        )
    return value


def _tensor_values(value: Any) -> np.ndarray | None:
    """A tensor NumPy's own reading refuses, read through its buffer (``numpy_values``): a 0-d
    bfloat16 TensorFlow tensor, whose ``__array__`` hands NumPy a scalar; ``None`` for
    anything else (a ragged list, an object NumPy cannot read)."""
    if not (hasattr(value, "dtype") and hasattr(value, "shape")):
        return None
    try:
        return np.array(numpy_values(value))
    except Exception:
        return None


def _array(value: Any, where: str) -> np.ndarray:
    """``value`` as a NumPy array of numbers, bools or strings, or a clear error."""
    if isinstance(value, np.ndarray):
        array = value
    else:
        _check_list_size(value, where)
        try:
            array = np.asarray(value)
        except Exception as error:  # ragged lists, tensors NumPy cannot read
            array = _tensor_values(value)
            if array is None:
                raise InvalidSpecError(
                    f"values{where}: not an array of numbers: {type(error).__name__}: "
                    f"{received(str(error))}; a value is an array, a rectangular nested list of "
                    f"numbers, bools or strings, or a Python number; received: "
                    f"{received(value)} ({type(value).__name__})"
                ) from None
    if (array.dtype.kind not in "biufcUS" and not _ml_dtype(array.dtype)) or array.dtype.names:
        raise InvalidSpecError(
            f"values{where}: a value travels as data (numbers, bools or strings), and this one "
            f"is a NumPy {array.dtype} array (from a {type(value).__name__}: {received(value)}); "
            "object arrays, functions and other Python objects are refused"
        )
    if array.ndim > 8 or array.size > MAX_VALUE_ELEMENTS:
        raise InvalidSpecError(
            f"values{where}: an array of shape {array.shape} ({array.size} elements); the "
            f"limit is {MAX_VALUE_ELEMENTS} elements and 8 dims, as for shapes"
        )
    if array.dtype.kind in "US":
        try:
            return array.astype(str)
        except UnicodeDecodeError:
            raise InvalidSpecError(
                f"values{where}: a NumPy {array.dtype} array of bytes that are not ASCII text "
                f"(received: {received(value)}); give strings (str), or numbers as a numeric "
                "array"
            ) from None
    try:
        dtypes.standardize(array.dtype, "values")
    except InvalidSpecError:
        raise InvalidSpecError(
            f"values{where}: Keras has no dtype for NumPy's {array.dtype}; give one of "
            f"{', '.join(dtypes.keras_dtypes())}"
        ) from None
    return array


def _ml_dtype(kind: np.dtype) -> bool:
    """An ml_dtypes dtype (bfloat16, float8_*, ...): numbers NumPy stores as ``V`` (void)."""
    return kind.kind == "V" and kind.type.__module__.split(".")[0] == "ml_dtypes"


def _check_list_size(value: Any, where: str) -> None:
    """Count a nested list's items before NumPy walks it (a 10**8-item list is refused fast)."""
    stack, count = [value], 0
    while stack:
        item = stack.pop()
        if isinstance(item, list | tuple):
            count += len(item)
            if count > MAX_VALUE_ELEMENTS:
                raise InvalidSpecError(
                    f"values{where}: a list of more than {MAX_VALUE_ELEMENTS} items; the limit "
                    f"is {MAX_VALUE_ELEMENTS} elements, as for shapes"
                )
            stack.extend(item)


def _own_dtype(array: np.ndarray) -> str:
    return "string" if array.dtype.kind in "US" else dtypes.standardize(array.dtype, "values")


def _converted(array: np.ndarray, asked: str, where: str) -> np.ndarray:
    """``array`` as ``asked``: exact for integer and bool dtypes, no finite value overflowing
    to inf, no imaginary part dropped."""
    own = _own_dtype(array)
    if (asked == "string") != (own == "string"):
        raise InvalidSpecError(
            f"values{where}: a {own} array cannot be given as {asked}; leave input_dtype out "
            f"to probe the value's own dtype ({own})"
        )
    if asked == "string":
        return array
    target = dtypes.numpy_dtype(asked)
    with np.errstate(all="ignore"):
        if dtypes.family(own) == "complex" and dtypes.family(asked) != "complex":
            bad = np.imag(array) != 0
            out = np.real(array).astype(target)
            return _refuse(array, out, bad, asked, where, "loses its imaginary part")
        out = array.astype(target)
        if dtypes.family(asked) in ("int", "uint", "bool"):
            back = out.astype(array.dtype)
            bad = back != array
            return _refuse(array, out, bad, asked, where, "")
        wide = array.astype(np.complex128 if dtypes.family(own) == "complex" else np.float64)
        bad = np.isfinite(wide) & ~np.isfinite(out.astype(wide.dtype))
        _refuse(array, out, bad, asked, where, "overflows")
        back = out.astype(array.dtype)  # rounded: 2909 as bfloat16 is 2912, 0.1 as float32
        same = (back == array) | (np.isnan(wide) & np.isnan(back.astype(wide.dtype)))
        return _refuse(array, out, ~same, asked, where, "")


def _refuse(
    array: np.ndarray, out: np.ndarray, bad: np.ndarray, asked: str, where: str, what: str
) -> np.ndarray:
    if not np.any(bad):
        return out
    index = tuple(int(i) for i in np.argwhere(np.asarray(bad))[0]) if array.ndim else ()
    given, became = array[index].item(), out[index].item()
    what = what or f"becomes {became!r}"
    raise InvalidSpecError(
        f"values{where}: element {list(index)} = {given!r} ({array.dtype}) {what} as {asked}; "
        f"{int(np.sum(bad))} of {array.size} elements do not fit. Give values {asked} holds, "
        f"or leave input_dtype out to probe the array's own dtype ({_own_dtype(array)})"
    )


def _where(path: tuple[Any, ...]) -> str:
    return "".join(f"[{p!r}]" for p in path)


def rebuild(structure: Any, leaves: list[Any]) -> list[Any]:
    """The target's inputs from the leaves: ``structure`` ``None`` gives the leaves
    themselves; else each node is rebuilt (dicts, tuples and lists as given).

    >>> rebuild([0, {"tuple": [1, {"dict": [["a", 2]]}]}], ["x", "y", "z"])
    ['x', ('y', {'a': 'z'})]
    """
    if structure is None:
        return list(leaves)
    if not isinstance(structure, list):
        raise ValueError("a values structure is a list of nodes, one per input")

    def one(node: Any) -> Any:
        if isinstance(node, int) and not isinstance(node, bool) and 0 <= node < len(leaves):
            return leaves[node]
        if isinstance(node, dict) and len(node) == 1:
            ((kind, items),) = node.items()
            if kind == "dict" and isinstance(items, list):
                return {str(k): one(v) for k, v in items}
            if kind in ("tuple", "list") and isinstance(items, list):
                built = [one(v) for v in items]
                return tuple(built) if kind == "tuple" else built
        raise ValueError(f"not a values structure node: {str(node)[:80]}")

    return [one(node) for node in structure]


def leaf_paths(structure: Any, count: int) -> list[tuple[Any, ...]]:
    """Each leaf's path (``(input, key, ...)``), from a structure as ``rebuild`` reads it.

    >>> leaf_paths([{"dict": [["images", 0], ["masks", 1]]}], 2)
    [(0, 'images'), (0, 'masks')]
    """
    if structure is None:
        return [(i,) for i in range(count)]
    paths: list[tuple[Any, ...]] = [()] * count

    def walk(node: Any, path: tuple[Any, ...]) -> None:
        if isinstance(node, int):
            paths[node] = path
            return
        ((kind, items),) = node.items()
        for j, item in enumerate(items):
            key, sub = (item[0], item[1]) if kind == "dict" else (j, item)
            walk(sub, (*path, key))

    for i, node in enumerate(structure):
        walk(node, (i,))
    return paths


def leaf_name(path: tuple[Any, ...], inputs: int) -> str | None:
    """How a leaf is named in the cast path: its keys (``"images"``), after its input's number
    when the target takes several (``"1/images"``); ``None`` for a plain input.

    >>> leaf_name((0, "images"), 1), leaf_name((1, "images"), 2), leaf_name((1,), 2)
    ('images', '1/images', None)
    """
    keys = [str(p) for p in path[1:]]
    if not keys:
        return None
    return "/".join(keys if inputs == 1 else [str(path[0]), *keys])


def call_arguments(call_kwargs: dict[str, Any]) -> dict[str, Any]:
    """A call's JSON keyword arguments as the call gets them: a list of numbers or bools
    becomes a NumPy array (a mask), everything else is passed as given.

    Args:
        call_kwargs: checked keyword arguments (``check_call_kwargs``).

    Returns:
        The keyword arguments the call gets.

    >>> call_arguments({"training": True, "mask": [[True, False]]})["mask"].dtype
    dtype('bool')
    """
    found = {}
    for key, value in call_kwargs.items():
        if isinstance(value, list):
            try:
                array = np.asarray(value)
            except ValueError:  # ragged: passed as the list it is
                array = None
            if array is not None and array.dtype.kind in "biuf":
                value = array
        found[key] = value
    return found
