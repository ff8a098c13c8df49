"""A probe as code (``ProbeResult.as_code()``, ``ProbeSet.as_code()``): the ``dx.probe(...)``
call that asks it again, written from the spec (every part the user gave, nothing the tool
filled in), and a raw-Keras script of the question written from the call the probe recorded
(``ProbeResult.called``): the backend set before Keras is imported, the policy and floatx,
the inputs with their values, the layer or op called in the probe's mode, and the dtypes
Keras exposes printed (``layer.compute_dtype``, each variable, each output).

Pure functions of the records: nothing here imports Keras or runs the code (the tests run it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from dtype_explorer import dtypes
from dtype_explorer.records._as_code import (
    FILL_IN,
    MAX_LITERAL_ELEMENTS,
    CodeArray,
    CodeCopy,
    KerasCall,
    array_code,
    list_code,
    needs_ml_dtypes,
    python_code,
    stand_in,
)
from dtype_explorer.records._as_code_script import call_lines, header_lines, output_lines
from dtype_explorer.records._values import InputValue

if TYPE_CHECKING:
    from dtype_explorer.records._probe import ProbeResult, ProbeSpec


def probe_code(results: Sequence[ProbeResult]) -> CodeCopy:
    """The code of one probe, or of a set (its results share one question, asked of several
    backends, modes or engines).

    Args:
        results: the results, in order (one for a ``ProbeResult``).

    Returns:
        The ``CodeCopy``: the ``dx.probe`` call, the raw script, what to fill in.
    """
    dx, fill = dx_call(results)
    script, more = raw_script(results)
    return CodeCopy(dx=dx, script=script, fill_in=tuple(dict.fromkeys([*fill, *more])))


# ------------------------------------------------------------------------------ dx.probe


def _unique(values: Sequence[Any]) -> list[Any]:
    return list(dict.fromkeys(values))


def dx_call(results: Sequence[ProbeResult]) -> tuple[str, list[str]]:
    """``result = dx.probe(...)`` asking the question again: each part the user gave (the
    spec's), nothing the tool filled in (``spec.filled``), the backends, modes and engines of
    the set as lists. A user's class, instance or large value is a name the user fills in."""
    spec = results[0].spec
    called = next((r.called for r in results if r.called is not None), None)
    pre: list[str] = []
    fill: list[str] = []
    target = _target_code(spec, called, pre, fill)
    args = [target]
    keywords: dict[str, str] = {}
    if "input_dtypes" not in spec.filled and not _values_keep_dtypes(spec):
        dts = spec.input_dtypes
        keywords["input_dtype"] = repr(dts[0]) if len(dts) == 1 else python_code(list(dts))
    if "policy" not in spec.filled:
        keywords["policy"] = repr(spec.policy)
    for name, values in (
        ("backend", [r.spec.backend for r in results]),
        ("mode", [r.spec.mode for r in results]),
        ("engine", [r.spec.engine for r in results]),
    ):
        found = _unique(values)
        if len(found) > 1:
            keywords[name] = python_code(found)
        elif name == "backend" or found[0] not in ("call", None):
            keywords[name] = repr(found[0])
    if spec.kwargs:
        keywords["kwargs"] = python_code(spec.kwargs)
    if spec.shapes is not None and spec.user_values is None:
        shapes = [list(s) for s in spec.shapes]
        keywords["shape"] = python_code(tuple(shapes[0]) if len(shapes) == 1 else shapes)
    if spec.user_values is not None:
        keywords["values"] = _given_values(spec, pre, fill)
    elif spec.values != "default":
        keywords["values"] = repr(spec.values)
    for name in ("floatx", "precision", "quantize"):
        if getattr(spec, name) is not None:
            keywords[name] = repr(getattr(spec, name))
    if spec.seed:
        keywords["seed"] = repr(spec.seed)
    if spec.call_kwargs:
        keywords["call_kwargs"] = python_code(spec.call_kwargs)
    body = ",\n".join(f"    {a}" for a in [*args, *(f"{k}={v}" for k, v in keywords.items())])
    heads = ["import dtype_explorer as dx"]
    if spec.user_values is not None:
        heads.append("import numpy as np")
        if needs_ml_dtypes([CodeArray(dtype=v.given_dtype or v.dtype) for v in spec.user_values]):
            heads.append("import ml_dtypes")
    lines = [*heads, "", *pre, *([""] if pre else []), f"result = dx.probe(\n{body},\n)"]
    lines += ["print(result)"]
    return "\n".join(lines), fill


def _target_code(spec: ProbeSpec, called: KerasCall | None, pre: list[str], fill: list[str]) -> str:
    """The target as the call names it: a catalog name as text; a user's class or instance
    by a name the user fills in (said in a comment above the call)."""
    instance = called is not None and (called.instance or called.config is not None)
    if not spec.target.startswith("custom:") and not instance:
        return repr(spec.target)
    qualname = (called.name if called is not None else spec.target.split(":", 1)[-1]).split(".")
    class_name = qualname[-1] if qualname[-1].isidentifier() else "MyLayer"
    if instance:
        what = f"your {class_name} instance (the one this answer is about)"
        pre.append(f"# {FILL_IN}: `target` is {what}")
        pre.append("target = ...")
        fill.append(f"target: {what}")
        return "target"
    pre.append(f"# {FILL_IN}: {class_name} is your layer class (import it, or define it above)")
    fill.append(f"{class_name}: your layer class")
    return class_name


def _values_keep_dtypes(spec: ProbeSpec) -> bool:
    """Whether the user's values were given with no ``input_dtype`` (each kept its own)."""
    return spec.user_values is not None and all(v.given_dtype is None for v in spec.user_values)


def _given_values(spec: ProbeSpec, pre: list[str], fill: list[str]) -> str:
    """``values=`` as the user gave them: each leaf in its own dtype (before ``input_dtype``
    converted it), nested as they nested them; a large one a name to fill in."""
    leaves = spec.user_values or ()
    names = []
    for i, value in enumerate(leaves):
        code = _given_leaf(value)
        if code is None:
            array = CodeArray(dtype=value.given_dtype or value.dtype, shape=value.shape)
            made, why = stand_in(array, user=True)
            pre.append(f"v{i} = {made}  # {why}")
            fill.append(f"v{i}: {why.split(': ', 1)[1]}")
            names.append(f"v{i}")
        else:
            names.append(code)
    if spec.structure is None:
        return "[" + ", ".join(names) + "]"
    return "[" + ", ".join(_structure_code(n, names) for n in spec.structure) + "]"


def _structure_code(node: Any, names: list[str]) -> str:
    """A ``ProbeSpec.structure`` node (leaf numbers nested in dicts, tuples and lists)."""
    if isinstance(node, int):
        return names[node]
    ((kind, items),) = node.items()
    if kind == "dict":
        return "{" + ", ".join(f"{k!r}: {_structure_code(v, names)}" for k, v in items) + "}"
    inner = [_structure_code(v, names) for v in items]
    if kind == "tuple":
        return f"({inner[0]},)" if len(inner) == 1 else f"({', '.join(inner)})"
    return f"[{', '.join(inner)}]"


def _given_leaf(value: InputValue) -> str | None:
    """One of the user's values as they gave it, or ``None`` when it is too large to write."""
    own = value.given_dtype or value.dtype
    if own in dtypes.PYTHON_SCALARS:
        number = value.value()
        found = number.item() if hasattr(number, "item") else number
        return python_code(dtypes.PYTHON_SCALARS[own](found))
    if value.size > MAX_LITERAL_ELEMENTS:
        return None
    data = value.value()
    if value.given_dtype is not None and value.dtype != "string":
        data = data.astype(dtypes.numpy_dtype(value.given_dtype))  # exact: checked when given
    return list_code(data) if value.kind == "list" else array_code(data)


# ---------------------------------------------------------------------------- raw script


def raw_script(results: Sequence[ProbeResult]) -> tuple[str, list[str]]:
    """The raw-Keras script of the question (the first result's call; a set across backends:
    the backend from the command line, its first one by default); where no call was recorded,
    a script that says why."""
    first = next((r for r in results if r.called is not None), results[0])
    call = first.called
    why = _no_script(first, call)
    if why:
        return f'"""No raw-Keras script: {why}"""\nraise SystemExit({why!r})\n', []
    assert call is not None
    backends = _unique([r.spec.backend for r in results if r.spec.mode == first.spec.mode])
    lines, fill = header_lines(first, call, backends, results)
    if call.instance:
        fill.append(f"{call.kind}: your {call.name.split('.')[-1]} instance")
    elif call.custom:
        fill.append(f"{call.name.split('.')[-1]}: your class")
    names = _array_lines(first.spec, call, lines, fill)
    lines += call_lines(first.spec, call, names, first.fit)
    lines += output_lines(call)
    return "\n".join(lines) + "\n", fill


def _no_script(result: ProbeResult, call: KerasCall | None) -> str:
    """Why this answer has no raw script (``""``: it has one)."""
    if result.spec.engine is not None and result.spec.engine.startswith("tf_keras"):
        return "the question was asked of Keras 2 (tf_keras); dx.probe above asks it again"
    if call is None:
        if result.status != "ok" and result.error is not None:
            return (
                f"the probe stopped before Keras was called ({result.error.type} at "
                f"{result.error.where}): {result.error.message[:200]}"
            )
        return (
            "this answer holds no record of the call (stored before dtype-explorer recorded "
            "calls, or one it could not record): ask again with use_cache=False"
        )
    return call.unwritable


def _array_lines(spec: ProbeSpec, call: KerasCall, lines: list[str], fill: list[str]) -> list[str]:
    """``x0 = ...`` for every array of the call (its values, or a stand-in said to be one);
    each name."""
    names = []
    for k, array in enumerate(call.arrays):
        name = f"x{k}"
        wrapped = len("keras.ops.convert_to_tensor(") if array.tensor is not None else 0
        code, note = _array_value(spec, array, len(name) + 3 + wrapped)
        if note.startswith(FILL_IN):
            fill.append(f"{name}: {note.split(': ', 1)[1]}")
        if array.tensor is not None:
            code = f"keras.ops.convert_to_tensor({code}, dtype={array.tensor!r})"
        lines.append(f"{name} = {code}" + (f"  # {note}" if note else ""))
        names.append(name)
    if call.arrays:
        lines.append("")
    return names


def _array_value(spec: ProbeSpec, array: CodeArray, indent: int) -> tuple[str, str]:
    """One array's code (and a comment, for a stand-in)."""
    data: InputValue | None = array.data
    user = array.user is not None
    if user and spec.user_values is not None and array.user < len(spec.user_values):
        data = spec.user_values[array.user]
        if data.kind.startswith("python_"):
            return python_code(data.value()), ""
        if data.size > MAX_LITERAL_ELEMENTS:
            data = None
    if data is None:
        return stand_in(array, user)
    value = data.value()
    if array.listed or data.kind == "list":
        return list_code(value, indent), ""
    return array_code(value, indent), ""
