"""A user's own input value, as data: an array's dtype, shape and bytes (base64), a string
array's items (JSON), or a Python number's exact text. Never code: decoding reads numbers,
never unpickles or evaluates anything, and refuses bytes that do not fit the dtype and shape.

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
from pydantic import model_validator

from dtype_explorer import dtypes
from dtype_explorer.records._base import Record

ValueKind = Literal["array", "python_int", "python_float", "python_bool"]
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
    decimal text; ``python_float``: ``float.hex``; ``python_bool``: ``"1"``/``"0"``)."""

    kind: ValueKind
    dtype: str
    shape: tuple[int, ...] = ()
    data: str = ""

    @model_validator(mode="after")
    def _check(self) -> InputValue:
        self.value()  # a row from a cache or a pipe that does not decode is refused here
        return self

    @classmethod
    def of_array(cls, array: np.ndarray) -> InputValue:
        """An array (numeric, bool, ml_dtypes or string) as data."""
        name = "string" if array.dtype.kind in "US" else dtypes.standardize(array.dtype, "values")
        if name == "string":
            data = json.dumps(array.astype(str).tolist())
        else:
            array = np.asarray(array, order="C")  # (ascontiguousarray makes 0-d arrays 1-d)
            if array.dtype.byteorder == ">":
                array = array.astype(array.dtype.newbyteorder("<"))
            data = base64.b64encode(array.tobytes()).decode("ascii")
        return cls(kind="array", dtype=name, shape=tuple(array.shape), data=data)

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
        if self.kind == "array" and self.dtype != "string":
            return self.size * dtypes.numpy_dtype(self.dtype).itemsize
        return len(self.data)

    def value(self) -> Any:
        """The NumPy array (a string array as a NumPy ``object`` array of ``str``), or the
        Python number. Raises ``ValueError`` for data that does not fit."""
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
        try:
            raw = base64.b64decode(self.data, validate=True)
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
    text = json.dumps([v.to_dict() for v in values], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()
