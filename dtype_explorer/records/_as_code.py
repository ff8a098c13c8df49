""" "Copy as code": what a question was, as code a user pastes into a notebook or a bug report.

Two records travel with the answers so that the code can be written from them alone, here,
as pure functions (``_as_code_probe``, ``_as_code_audit``): :class:`KerasCall`, what Keras was
called with in a probe (the constructor, its keyword arguments, the call's arguments, each
array with its exact values where it is small), recorded by the probe as it calls; and an
audit's :class:`AuditQuestion`. :class:`CodeCopy` is the code: the ``dx.probe(...)`` /
``dx.check_model(...)`` call that asks the question again, and a raw-Keras script of it,
runnable alone with ``python script.py``, with what the user must fill in said.

Arguments nest as *nodes* (JSON): ``{"array": k}`` (``arrays[k]``), ``{"value": v}`` (a JSON
literal), ``{"tuple": [...]}``, ``{"list": [...]}``, ``{"dict": [[key, node], ...]}`` and
``{"layer": config}`` (a serialized Keras layer, ``keras.layers.deserialize(config)``).

>>> import numpy as np
>>> array_code(np.array([[1, 2]], dtype="uint8"))
"np.array([[1, 2]], dtype='uint8')"
>>> node_code({"tuple": [{"value": 2}, {"array": 0}]}, ["x0"])
'(2, x0)'
"""

from __future__ import annotations

import math
import pprint
from typing import Any, Literal

import numpy as np
from pydantic import Field, JsonValue, computed_field

from dtype_explorer import dtypes
from dtype_explorer.records._base import ComputedRecord, Record
from dtype_explorer.records._values import InputValue

#: The most elements an array may hold to be written out as a literal (and recorded with its
#: values); a larger one is a stand-in the script says it is.
MAX_LITERAL_ELEMENTS = 1024
#: The most values a model's weights may hold in all to be written out in an audit's script.
MAX_WEIGHT_ELEMENTS = 4096
#: What marks a line the user must change before the code runs.
FILL_IN = "FILL IN"


class CodeArray(Record):
    """One array (or list) a call was given: its dtype and shape, and its exact values
    (``data``, when it holds at most :data:`MAX_LITERAL_ELEMENTS`); ``user``: the user's own
    value of that number (``ProbeSpec.user_values``), written from there; ``tensor``: made a
    backend tensor of that dtype before the call (``keras.ops.convert_to_tensor``);
    ``listed``: passed as a Python list (strings to a layer, a user's nested list to an op)."""

    dtype: str
    shape: tuple[int, ...] = ()
    data: InputValue | None = None
    user: int | None = None
    tensor: str | None = None
    listed: bool = False
    #: How the tool made it, for a stand-in's comment (``"the 'default' preset, seed 0"``).
    made: str = ""


class KerasCall(Record):
    """What Keras was called with in a probe, as a raw script writes it: the target (``name``:
    ``keras.layers.Dense``, ``keras.ops.add``, ``keras.losses.MeanSquaredError``; a user's
    class by its qualified name, ``custom``; a user's instance, ``instance``), its
    constructor's keyword arguments and the call's arguments, as nodes (see the module), and
    the arrays they name. ``unwritable``: why no script can write this call (a control-flow
    op's Python function); empty when it can."""

    kind: Literal["layer", "op", "loss", "metric"]
    name: str
    custom: bool = False
    instance: bool = False
    init_kwargs: dict[str, JsonValue] = Field(default_factory=dict)
    args: tuple[JsonValue, ...] = ()
    kwargs: dict[str, JsonValue] = Field(default_factory=dict)
    arrays: tuple[CodeArray, ...] = ()
    #: How a layer takes its inputs: ``"single"``, ``"positional"`` or ``"list"`` (``args``
    #: are then the inputs, one node each).
    style: str = "single"
    #: A user's instance of Keras's own class, as its serialized config: the script makes
    #: it again with ``keras.saving.deserialize_keras_object`` (a layer's weights fresh).
    config: JsonValue = None
    unwritable: str = ""


class AuditQuestion(Record):
    """``check_model``'s question as the audit took it, for "copy as code": the sample (and
    the labels of a training run) as nodes over arrays, whether the user gave them, the
    arguments that are data, and what a raw script needs to make the model again: its
    serialized config (``config``: every layer Keras's own, small enough) or, where it
    cannot, why not (``model_note``), and how the training copy was compiled."""

    sample: JsonValue = None
    labels: JsonValue = None
    arrays: tuple[CodeArray, ...] = ()
    sample_given: bool = False
    labels_given: bool = False
    call_kwargs: dict[str, JsonValue] = Field(default_factory=dict)
    timeout: float | None = None
    steps: int = 1
    #: The quantization mode asked (``"int8"``), or a config's class name (``GPTQConfig``).
    quantize: str | None = None
    quantize_config: bool = False
    config: JsonValue = None
    model_note: str = ""
    #: The training copy's compile config (``model.get_compile_config()``), where it is JSON.
    compile_config: JsonValue = None
    #: The model's weights (``get_weights()``), where they are few enough to write out
    #: (:data:`MAX_WEIGHT_ELEMENTS` in all): the script then runs the same model.
    weights: tuple[CodeArray, ...] | None = None


class CodeCopy(ComputedRecord):
    """A question as code: ``dx`` asks it again with dtype-explorer, ``script`` asks it of
    raw Keras, runnable alone (``python script.py``); ``fill_in`` says what the user must
    supply first (their model, their layer class, a large array), empty when nothing.

    >>> CodeCopy(dx="x = 1", script="print(1)").clipboard.splitlines()[0]
    '# dtype-explorer: the call that asks this again'
    """

    dx: str
    script: str
    fill_in: tuple[str, ...] = ()

    @property
    def runnable(self) -> bool:
        """Whether both run as written (nothing to fill in)."""
        return not self.fill_in

    @computed_field  # type: ignore[prop-decorator]
    @property
    def clipboard(self) -> str:
        """Both, each under a comment naming it: what "Copy as code" puts on the clipboard
        (in the JSON for the widget's page)."""
        return (
            f"# dtype-explorer: the call that asks this again\n{self.dx}\n\n"
            f"# raw Keras: the question as a script (python repro.py)\n{self.script}"
        )


# --------------------------------------------------------------------------- literals


def python_code(value: Any) -> str:
    """A JSON value (or a Python number, tuple, list, dict) as a Python literal; non-finite
    floats as ``float("nan")``.

    >>> python_code({"units": 4, "use_bias": False, "x": [1.5, None]})
    "{'units': 4, 'use_bias': False, 'x': [1.5, None]}"
    """
    if isinstance(value, float) and not math.isfinite(value):
        return f'float("{value}")'
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {python_code(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(python_code(v) for v in value) + "]"
    if isinstance(value, tuple):
        inner = ", ".join(python_code(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    return repr(value)


def _nested_text(items: Any, indent: int) -> str:
    """A nested list of numbers, wrapped to the script's width."""
    text = pprint.pformat(items, width=max(40, 96 - indent), compact=True)
    for bad in ("nan", "inf"):
        text = text.replace(f"-{bad}", f'float("-{bad}")')
        text = _bare(text, bad)
    return text.replace("\n", "\n" + " " * indent)


def _bare(text: str, word: str) -> str:
    """``nan`` / ``inf`` standing alone in ``text`` written ``float("nan")``."""
    out, i = [], 0
    while True:
        j = text.find(word, i)
        if j < 0:
            return "".join([*out, text[i:]])
        before = text[j - 1] if j else " "
        after = text[j + len(word)] if j + len(word) < len(text) else " "
        alone = not (before.isalnum() or before in "\"'_-") and not (
            after.isalnum() or after in "\"'"
        )
        out += [text[i:j], f'float("{word}")' if alone else word]
        i = j + len(word)


def array_code(value: np.ndarray, indent: int = 0) -> str:
    """An array as ``np.array(<values>, dtype=...)``: its exact values (a 16-bit or 8-bit
    float through ``ml_dtypes``), strings as a ``dtype=object`` array of ``str``; ``indent``:
    the column the code starts at (its rows line up under the first).

    >>> array_code(np.array([1.5, float("nan")], dtype="float16"))
    'np.array([1.5, float("nan")], dtype=\\'float16\\')'
    """
    name = dtypes.standardize(value.dtype, "values") if value.dtype.kind not in "OUS" else "string"
    if name == "string":
        return f"np.array({_nested_text(value.astype(str).tolist(), indent + 9)}, dtype=object)"
    plain = value.astype("float32") if name in dtypes.ML_DTYPES else value
    dtype = f"ml_dtypes.{name}" if name in dtypes.ML_DTYPES else repr(name)
    return f"np.array({_nested_text(plain.tolist(), indent + 9)}, dtype={dtype})"


def list_code(value: np.ndarray, indent: int = 0) -> str:
    """An array written as the nested Python list it was given as."""
    return _nested_text(value.tolist(), indent)


def stand_in(array: CodeArray, user: bool) -> tuple[str, str]:
    """An array whose values are not written out: code making one of its dtype and shape,
    and the comment saying it stands in (``FILL IN`` for the user's own values)."""
    shape, name = tuple(array.shape), array.dtype
    if name == "string":
        code = f"np.full({shape!r}, 'red', dtype=object)"
    elif name in dtypes.ML_DTYPES:
        code = f"np.ones({shape!r}, dtype=ml_dtypes.{name})"
    else:
        code = f"np.ones({shape!r}, dtype={name!r})"
    elements = math.prod(shape)
    if user:
        return code, f"{FILL_IN}: your {name} array of shape {shape} ({elements} values)"
    made = f" ({array.made})" if array.made else ""
    return code, (
        f"stands in for the tool's sample{made}: {elements} values are not written out; "
        "the dtypes do not depend on them"
    )


def needs_ml_dtypes(arrays: tuple[CodeArray, ...] | list[CodeArray]) -> bool:
    """Whether writing ``arrays`` needs ``import ml_dtypes`` (bfloat16, float8)."""
    return any(a.dtype in dtypes.ML_DTYPES for a in arrays)


def node_code(node: Any, names: list[str]) -> str:
    """A node (see the module) as Python code; ``names[k]`` is array ``k``'s variable.

    >>> node_code({"dict": [["images", {"array": 0}], ["n", {"value": 3}]]}, ["x0"])
    "{'images': x0, 'n': 3}"
    """
    if not isinstance(node, dict) or len(node) != 1:
        raise ValueError(f"not a code node: {str(node)[:80]}")
    ((kind, inner),) = node.items()
    if kind == "array":
        return names[inner]
    if kind == "value":
        return python_code(inner)
    if kind == "layer":
        return f"keras.layers.deserialize({python_code(inner)})"
    if kind == "dict":
        return "{" + ", ".join(f"{k!r}: {node_code(v, names)}" for k, v in inner) + "}"
    if kind not in ("tuple", "list"):
        raise ValueError(f"not a code node kind: {kind!r}")
    items = [node_code(v, names) for v in inner]
    if kind == "tuple":
        return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
    return f"[{', '.join(items)}]"


def literal_text(value: Any, indent: int = 0) -> str:
    """A JSON document (a model's config) as a Python literal, wrapped to the script's width.

    >>> literal_text({"a": [1, None], "b": True})
    "{'a': [1, None], 'b': True}"
    """
    text = pprint.pformat(value, width=max(40, 96 - indent), compact=True, sort_dicts=False)
    return text.replace("\n", "\n" + " " * indent)
