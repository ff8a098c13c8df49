"""The parts of a probe's raw-Keras script (``_as_code_probe.raw_script``): its head (what
it asks, what dtype-explorer answered, the backend set before Keras is imported, the policy
and floatx), the call in the probe's mode (a layer eagerly, with ``training=True``, in a
functional model, through ``predict`` or one ``fit`` step, in ``tf.data``; an op; a loss or a
metric), and the dtypes Keras exposes, printed.

>>> from dtype_explorer.records._as_code import KerasCall
>>> call = KerasCall(kind="op", name="keras.ops.add", args=({"array": 0}, {"value": 2}))
>>> target_lines(call, ["x0"])[-1]
'y = keras.ops.add(x0, 2)'
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from dtype_explorer.records._as_code import (
    FILL_IN,
    KerasCall,
    literal_text,
    needs_ml_dtypes,
    node_code,
)

if TYPE_CHECKING:
    from dtype_explorer.records._fit import FitReport
    from dtype_explorer.records._probe import ProbeResult, ProbeSpec

#: The modes that run a layer inside a functional model.
MODEL_MODES = ("model", "predict", "fit")


def header_lines(
    result: ProbeResult, call: KerasCall, backends: list[str], results: Sequence[ProbeResult]
) -> tuple[list[str], list[str]]:
    """The docstring (what is asked, what dtype-explorer answered, how to run it), the
    backend set before Keras is imported (from the command line for several), the imports,
    floatx and the policy; and what the user must fill in."""
    spec = result.spec
    keras_version = result.versions.get("keras", "")
    what = spec.target.removeprefix("custom:")
    if call.kind != "op":
        what += f" under policy {spec.policy}"
    if spec.mode != "call":
        what += f", mode {spec.mode!r}"
    answered = [
        f"  {r.backend}: {r.headline}" + (f"; cast path {r.path_text()}" if r.ok else "")
        for r in results
        if r.spec.mode == spec.mode and r.spec.engine == spec.engine
    ]
    run = "python repro.py" + (f" [{' | '.join(backends)}]" if len(backends) > 1 else "")
    doc = [
        f'"""{what}, in raw Keras: the question dtype-explorer asked'
        + (f" of Keras {keras_version}." if keras_version else "."),
        "",
        "dtype-explorer answered:",
        *answered,
        "",
        f"Run it alone: {run}",
    ]
    if spec.engine is not None:
        doc.append(f"The answer is {spec.engine}'s: run it with that Keras (pip install ...).")
    lines = [*doc, '"""', "import os"]
    if len(backends) > 1:
        lines += [
            "import sys",
            "",
            f'BACKEND = sys.argv[1] if len(sys.argv) > 1 else "{backends[0]}"  # or '
            + ", ".join(backends[1:]),
            'os.environ["KERAS_BACKEND"] = BACKEND  # before Keras is imported',
        ]
    else:
        lines += ["", f'os.environ["KERAS_BACKEND"] = "{backends[0]}"  # before Keras is imported']
    lines += ["", "import keras", "import numpy as np"]
    if needs_ml_dtypes(call.arrays):
        lines.append("import ml_dtypes")
    if spec.mode == "dataset":
        lines.append("import tensorflow as tf")
    lines.append("")
    if spec.floatx:
        lines.append(f"keras.config.set_floatx({spec.floatx!r})")
    lines.append(f"keras.config.set_dtype_policy({spec.policy!r})")
    if spec.precision is not None:
        lines.append(
            f"# dtype-explorer set the float32 matmul precision to {spec.precision!r} "
            "(precision=): on a GPU, set your backend's the same way"
        )
    return [*lines, ""], []


def target_lines(call: KerasCall, names: list[str]) -> list[str]:
    """An op called (``y = keras.ops.add(...)``), or the layer, loss or metric made
    (``layer = ...``) with its constructor's keyword arguments; a user's class or instance a
    name to fill in."""
    inputs = [node_code(n, names) for n in call.args]
    keywords = [f"{k}={node_code(v, names)}" for k, v in call.kwargs.items() if k.isidentifier()]
    if call.kind == "op":
        return [f"y = {call.name}({', '.join([*inputs, *keywords])})"]
    init = _keywords(call.init_kwargs, names)
    var = {"layer": "layer", "loss": "loss", "metric": "metric"}[call.kind]
    if call.instance:
        return [
            f"# {FILL_IN}: `{var}` is your {call.name.split('.')[-1]} instance (load or make it)",
            f"{var} = ...",
            f"if {var} is ...:",
            f'    raise SystemExit("{FILL_IN}: set `{var}` to your instance above")',
        ]
    if call.config is not None:
        return [
            f"# your {call.name.split('.')[-1]} instance, made again from its config (its "
            "weights fresh: the dtypes do not depend on them)",
            f"{var} = keras.saving.deserialize_keras_object({literal_text(call.config, 4)})",
        ]
    lines = []
    if call.custom:
        lines.append(f"# {FILL_IN}: {call.name} is your class (import it, or define it above)")
    return [*lines, f"{var} = {call.name.split('.')[-1] if call.custom else call.name}({init})"]


def _keywords(kwargs: dict, names: list[str]) -> str:
    """Keyword arguments as code (a key that is no identifier passed with ``**``)."""
    plain = [f"{k}={node_code(v, names)}" for k, v in kwargs.items() if k.isidentifier()]
    odd = {k: v for k, v in kwargs.items() if not k.isidentifier()}
    if odd:
        plain.append(
            "**{" + ", ".join(f"{k!r}: {node_code(v, names)}" for k, v in odd.items()) + "}"
        )
    return ", ".join(plain)


def call_lines(
    spec: ProbeSpec, call: KerasCall, names: list[str], fit: FitReport | None
) -> list[str]:
    """The target made and called in the probe's mode; ``y`` holds what it returned."""
    lines = target_lines(call, names)
    if call.kind == "op":
        return [*lines, *_op_mode(spec)]
    if call.kind == "loss":
        return [*lines, f"y = loss({_call_arguments(call, names)})"]
    if call.kind == "metric":
        return [
            *lines,
            f"metric.update_state({_call_arguments(call, names)})",
            "y = metric.result()",
        ]
    lines += _quantize_lines(spec, call)
    if spec.mode in MODEL_MODES:
        return [*lines, *_model_lines(spec, call, names, fit)]
    if spec.mode == "dataset":
        slices = ", ".join(node_code(n, names) for n in call.args)
        batch = call.arrays[0].shape[0] if call.arrays and call.arrays[0].shape else 1
        inner = _layer_call(call, [f"xs[{i}]" for i in range(len(call.args))], names)
        return [
            *lines,
            f"data = tf.data.Dataset.from_tensor_slices(({slices},)).batch({batch})",
            f"y = next(iter(data.map(lambda *xs: {inner})))",
        ]
    training = ["training=True"] if spec.mode == "training" else []
    inputs = [node_code(n, names) for n in call.args]
    return [*lines, f"y = {_layer_call(call, inputs, names, training)}"]


def _call_arguments(call: KerasCall, names: list[str]) -> str:
    return ", ".join(
        [node_code(n, names) for n in call.args]
        + [f"{k}={node_code(v, names)}" for k, v in call.kwargs.items()]
    )


def _layer_call(
    call: KerasCall, inputs: list[str], names: list[str], extra: Sequence[str] = ()
) -> str:
    """``layer(...)`` as the probe calls it: on one input, positionally, or on a list."""
    keywords = [f"{k}={node_code(v, names)}" for k, v in call.kwargs.items()]
    given = f"[{', '.join(inputs)}]" if call.style == "list" else ", ".join(inputs)
    return f"layer({', '.join([given, *keywords, *extra])})"


def _op_mode(spec: ProbeSpec) -> list[str]:
    if spec.mode == "fit":
        return ["# (mode 'fit': dtype-explorer also took the gradient w.r.t. the float inputs)"]
    return []


def _quantize_lines(spec: ProbeSpec, call: KerasCall) -> list[str]:
    """The layer built on the inputs' shapes and quantized, as ``Model.quantize`` does."""
    if spec.quantize is None:
        return []
    mode, _, block = spec.quantize.partition("/")
    shapes = [
        f"keras.KerasTensor({a.shape!r}, dtype={(a.tensor or a.dtype)!r})" for a in call.arrays
    ]
    config = (
        f", config=keras.quantizers.Int4QuantizationConfig(block_size={block})" if block else ""
    )
    return [
        f"{_layer_call(call, shapes, [])}  # builds the layer (a symbolic call)",
        f"layer.quantize({mode!r}, type_check=True{config})",
    ]


def _model_lines(
    spec: ProbeSpec, call: KerasCall, names: list[str], fit: FitReport | None
) -> list[str]:
    """The layer inside a functional model whose ``keras.Input``\\ s have the inputs' dtypes,
    then ``Model.__call__``, ``model.predict`` or one ``model.fit`` step."""
    lines = []
    inputs = []
    for k, array in enumerate(call.arrays):
        dtype = spec.input_dtypes[min(k, len(spec.input_dtypes) - 1)]
        lines.append(
            f"input{k} = keras.Input(shape={tuple(array.shape[1:])!r}, "
            f"batch_size={array.shape[0] if array.shape else None}, dtype={dtype!r})"
        )
        inputs.append(f"input{k}")
    given = inputs[0] if len(inputs) == 1 else f"[{', '.join(inputs)}]"
    x = names[0] if len(names) == 1 else f"[{', '.join(names)}]"
    lines.append(f"model = keras.Model({given}, {_layer_call(call, inputs, names)})")
    if spec.mode == "model":
        return [*lines, f"y = model({x})"]
    batch = call.arrays[0].shape[0] if call.arrays and call.arrays[0].shape else None
    if spec.mode == "predict":
        return [*lines, f"y = model.predict({x}, batch_size={batch}, verbose=0)"]
    loss = fit.loss if fit is not None else "mean_squared_error"
    sparse = "sparse" in loss
    labels = (
        'np.zeros(tuple(out.shape)[:-1], "int32")'
        if sparse
        else 'np.zeros(tuple(out.shape), "float32")'
    )
    return [
        *lines,
        f"model.compile(optimizer=keras.optimizers.SGD(0.01), loss={loss!r})",
        f"y = model({x}, training=True)",
        "out = keras.tree.flatten(y)[0]",
        f"history = model.fit({x}, {labels}, batch_size={batch}, epochs=1, verbose=0, "
        "shuffle=False)",
        'print("optimizer:", type(model.optimizer).__name__, "loss:", history.history["loss"])',
    ]


#: The generated scripts' helper: a value's dtype as Keras names it.
DTYPE_OF = (
    "def dtype_of(value):",
    '    """A tensor\'s dtype as Keras names it; a Python number\'s kind (python_int)."""',
    '    if hasattr(value, "dtype"):',
    "        return keras.backend.standardize_dtype(value.dtype)",
    '    return "python_" + type(value).__name__',
)


def output_lines(call: KerasCall) -> list[str]:
    """The dtypes Keras exposes, printed: the layer's compute and variable dtypes, each
    variable's, and each output's (a Python number as ``python_int``, ...)."""
    lines = [
        "",
        "",
        *DTYPE_OF,
        "",
        "",
        'print("keras", keras.__version__, "on", keras.backend.backend())',
    ]
    if call.kind == "layer":
        lines += [
            'print("layer.compute_dtype:", layer.compute_dtype)',
            'print("layer.variable_dtype:", layer.variable_dtype)',
            "for variable in layer.weights:",
            '    print(f"variable {variable.name}: {dtype_of(variable)}")',
        ]
    lines.append('print("output dtypes:", [dtype_of(t) for t in keras.tree.flatten(y)])')
    return lines
