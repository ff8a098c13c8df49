"""A user's own input value, as data: an array's dtype, shape and bytes (base64), a string
array's items (JSON), or a Python number's exact text. Never code: decoding reads numbers,
never unpickles or evaluates anything, and refuses bytes that do not fit the dtype and shape.
How values nest (``ProbeSpec.structure``) is read here too (:func:`structure_leaves`).

>>> import numpy as np
>>> value = InputValue.of_array(np.array([[2, 3]], dtype=np.int32))
>>> value.dtype, value.shape, value.value().tolist()
('int32', (1, 2), [[2, 3]])
>>> InputValue.of_python(3).value(), InputValue.of_python(0.1).value() == 0.1
(3, True)
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
from typing import Any, Literal

import numpy as np
from pydantic import PrivateAttr, model_validator

from dtype_explorer import dtypes
from dtype_explorer.records._base import Record

ValueKind = Literal["array", "list", "python_int", "python_float", "python_bool"]
#: The most elements one array may hold (as a probe's shapes), and the most bytes all the
#: values of one probe may hold: they travel to workers and are stored with the answer.
MAX_VALUE_ELEMENTS = 1 << 22
MAX_VALUES_BYTES = 8 << 20
#: The most digits of a Python int (Keras converts it to an int32/int64 tensor anyway).
MAX_INT_DIGITS = 100


class InputValue(Record):
    """One leaf of a user's input: an array (``kind="array"``, its Keras ``dtype``, ``shape``,
    and ``data``: base64 of its little-endian C-order bytes, or a JSON list for strings), or a
    Python scalar passed to Keras as the Python number it is (``python_int``: ``data`` is its
    decimal text; ``python_float``: ``float.hex``; ``python_bool``: ``"1"``/``"0"``). A nested
    Python list is stored as the array NumPy reads (``kind="list"``) and given back to an op
    as the list it was (:meth:`as_given`). ``given_dtype`` is the value's own dtype when
    ``input_dtype`` converted it before Keras saw it (``None``: as given)."""

    kind: ValueKind
    dtype: str
    shape: tuple[int, ...] = ()
    data: str = ""
    given_dtype: str | None = None
    _decoded: Any = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _check(self) -> InputValue:
        if self._decoded is None:  # a row from a cache or a pipe that does not decode is
            self._decoded = self._decode()  # refused here (once: a record in a record is
        return self  # validated again)

    def __eq__(self, other: object) -> bool:  # the fields, not the decoded array kept aside
        return isinstance(other, InputValue) and self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def _fields(self) -> tuple[str, str, tuple[int, ...], str, str | None]:
        return (self.kind, self.dtype, self.shape, self.data, self.given_dtype)

    @classmethod
    def of_array(
        cls, array: np.ndarray, *, listed: bool = False, given_dtype: str | None = None
    ) -> InputValue:
        """An array (numeric, bool, ml_dtypes or string) as data; ``listed``: it was given
        as a nested Python list; ``given_dtype``: its own dtype before ``input_dtype``
        converted it."""
        name = "string" if array.dtype.kind in "US" else dtypes.standardize(array.dtype, "values")
        if name == "string":
            data = json.dumps(array.astype(str).tolist())
        else:
            array = np.asarray(array, order="C")  # (ascontiguousarray makes 0-d arrays 1-d)
            if array.dtype.byteorder == ">":
                array = array.astype(array.dtype.newbyteorder("<"))
            data = base64.b64encode(array.tobytes()).decode("ascii")
        made = cls.model_construct(
            kind="list" if listed else "array",
            dtype=name,
            shape=tuple(array.shape),
            data=data,
            given_dtype=given_dtype,
        )
        made._decoded = array.copy() if name != "string" else made._decode()
        return made  # (its fields are made here from the array: nothing to decode again)

    @classmethod
    def of_python(cls, number: bool | int | float) -> InputValue:
        """A Python ``bool``, ``int`` or ``float``, kept a Python scalar."""
        if isinstance(number, bool):
            return cls(kind="python_bool", dtype="python_bool", data="1" if number else "0")
        if isinstance(number, int):
            return cls(kind="python_int", dtype="python_int", data=str(number))
        return cls(kind="python_float", dtype="python_float", data=float(number).hex())

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """What the value holds, in bytes (its text for strings and Python numbers)."""
        if self.kind in ("array", "list") and self.dtype != "string":
            return self.size * dtypes.numpy_dtype(self.dtype).itemsize
        return len(self.data)

    def value(self) -> Any:
        """The NumPy array (a string array as a NumPy ``object`` array of ``str``; a fresh
        copy each time, so a call that writes into its input changes no other), or the Python
        number."""
        decoded = self._decoded if self._decoded is not None else self._decode()
        return decoded.copy() if isinstance(decoded, np.ndarray) else decoded

    def as_given(self) -> Any:
        """The value as the user gave it: a nested Python list for ``kind="list"``, else
        :meth:`value`."""
        found = self.value()
        return found.tolist() if self.kind == "list" else found

    def _decode(self) -> Any:
        """Raises ``ValueError`` for data that does not fit the kind, dtype and shape."""
        if self.kind == "python_bool":
            if self.data not in ("0", "1"):
                raise ValueError(f"a python_bool value is '0' or '1', not {self.data[:20]!r}")
            return self.data == "1"
        if self.kind == "python_int":
            if len(self.data) > MAX_INT_DIGITS + 1:
                raise ValueError(f"a python_int value has at most {MAX_INT_DIGITS} digits")
            return int(self.data)
        if self.kind == "python_float":
            return float.fromhex(self.data)
        if len(self.shape) > 8 or any(d < 0 for d in self.shape) or self.size > MAX_VALUE_ELEMENTS:
            raise ValueError(f"an array value's shape {self.shape} is out of bounds")
        if self.dtype == "string":
            items = np.asarray(json.loads(self.data), dtype=object)
            if items.shape != self.shape or not all(isinstance(s, str) for s in items.flat):
                raise ValueError("a string value is a JSON list of strings of its shape")
            return items
        kind = dtypes.numpy_dtype(dtypes.validate(self.dtype))
        try:  # (not validate=True: 5x slower; a stray character changes the length below)
            raw = binascii.a2b_base64(self.data)
        except (binascii.Error, ValueError):
            raise ValueError("an array value's data is not base64") from None
        if len(raw) != self.size * kind.itemsize:
            raise ValueError(
                f"an array value of {self.dtype} {self.shape} holds "
                f"{self.size * kind.itemsize} bytes, not {len(raw)}"
            )
        if kind.byteorder == "=":
            kind = kind.newbyteorder("<")
        return (
            np.frombuffer(raw, dtype=kind)
            .reshape(self.shape)
            .astype(dtypes.numpy_dtype(self.dtype))
        )


def values_digest(values: tuple[InputValue, ...]) -> str:
    """A SHA-256 of the values (the cache key holds this, not the data)."""
    digest = hashlib.sha256()
    for v in values:  # each value's kind, dtype and shape, then its data, in turn
        digest.update(json.dumps([v.kind, v.dtype, list(v.shape)]).encode())
        digest.update(v.data.encode("ascii", "backslashreplace") + b"\0")
        if v.given_dtype is not None:  # (absent before: the digests stored then still hold)
            digest.update(f"given {v.given_dtype}".encode("ascii", "backslashreplace") + b"\0")
    return digest.hexdigest()


def structure_leaves(structure: object, depth: int = 0) -> list[int]:
    """The leaf numbers of a values ``structure`` in order (``ProbeSpec.structure``: a list of
    nodes, a node a leaf's number, ``{"tuple": [...]}``, ``{"list": [...]}`` or ``{"dict":
    [[key, node], ...]}``); ``ValueError`` for anything else.

    >>> structure_leaves([0, {"dict": [["a", 1], ["b", {"tuple": [2]}]]}])
    [0, 1, 2]
    """
    if depth > 16:
        raise ValueError("structure nests more than 16 deep")
    if depth == 0:
        if not isinstance(structure, list):
            raise ValueError(f"structure is a list of nodes, one per input. Received: {structure}")
        return [leaf for node in structure for leaf in structure_leaves(node, 1)]
    if isinstance(structure, int) and not isinstance(structure, bool) and structure >= 0:
        return [structure]
    if isinstance(structure, dict) and len(structure) == 1:
        ((kind, items),) = structure.items()
        if kind in ("tuple", "list") and isinstance(items, list):
            return [leaf for item in items for leaf in structure_leaves(item, depth + 1)]
        pairs = isinstance(items, list) and all(
            isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) for p in items
        )
        if kind == "dict" and pairs:
            return [leaf for _, item in items for leaf in structure_leaves(item, depth + 1)]
    raise ValueError(f"not a structure node: {str(structure)[:80]}")
