"""An audit as code (``AuditReport.as_code()``): the ``dx.check_model(...)`` call that runs it
again on the user's ``model`` (the one thing a record cannot hold: the user fills it in), and
a raw-Keras script of the question: the model made again from the config the audit recorded
(every layer Keras's own: fresh weights, which the dtypes do not depend on), or loaded from a
path the user fills in; the sample; the model run in the audit's mode (``steps`` training
steps for ``"fit"``, each printed); every layer's policy, compute and variable dtypes and the
outputs' dtypes printed.

Pure functions of the record (``AuditReport.question``): the tests run the code.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from dtype_explorer.records._as_code import (
    FILL_IN,
    AuditQuestion,
    CodeCopy,
    array_code,
    list_code,
    literal_text,
    needs_ml_dtypes,
    node_code,
    python_code,
    stand_in,
)
from dtype_explorer.records._as_code_script import DTYPE_OF

if TYPE_CHECKING:
    from dtype_explorer.records._audit import AuditReport


def audit_code(report: AuditReport) -> CodeCopy:
    """The code of an audit: the ``dx.check_model`` call and the raw-Keras script.

    Args:
        report: the audit (its ``question``: ``None`` for a Keras 2 audit, or an old report).

    Returns:
        The ``CodeCopy``; ``fill_in`` names the model, and anything else to supply.
    """
    question = report.question or AuditQuestion()
    names, arrays, fill = _arrays(question)
    dx = _dx_call(report, question, arrays)
    if report.question is None or (report.engine is not None and "tf_keras" in report.engine):
        why = "a Keras 2 (tf_keras) audit, or a report that holds no record of its question"
        script = f'"""No raw-Keras script: {why}; dx.check_model above runs it again."""\n'
        return CodeCopy(dx=dx, script=script, fill_in=("model: your model", *fill))
    model_lines, more = _model_lines(report, question)
    lines = [
        *_head(report, question),
        *model_lines,
        *arrays,
        *_run_lines(report, question, names),
        *_print_lines(),
    ]
    return CodeCopy(
        dx=dx, script="\n".join(lines) + "\n", fill_in=("model: your model", *fill, *more)
    )


def _arrays(question: AuditQuestion) -> tuple[list[str], list[str], list[str]]:
    """``x0 = ...`` for each array of the sample and the labels, then ``sample = ...`` and
    ``labels = ...`` nesting them; the names, the lines, what to fill in."""
    names, lines, fill = [], [], []
    for k, array in enumerate(question.arrays):
        name = f"x{k}"
        if array.data is None:
            code, note = stand_in(array, user=True)
            fill.append(f"{name}: {note.split(': ', 1)[1]}")
            lines.append(f"{name} = {code}  # {note}")
        else:
            value = array.data.value()
            code = list_code(value, 5) if array.listed else array_code(value, 5)
            lines.append(f"{name} = {code}")
        names.append(name)
    if question.sample is not None:
        lines.append(f"sample = {node_code(question.sample, names)}")
    else:
        what = "the model's input (the audit's sample could not be written as code)"
        fill.append(f"sample: {what}")
        lines += [
            f"sample = None  # {FILL_IN}: {what}",
            "if sample is None:",
            f'    raise SystemExit("{FILL_IN}: set `sample` to the model\'s input above")',
        ]
    if question.labels is not None:
        lines.append(f"labels = {node_code(question.labels, names)}")
    return names, lines, fill


def _dx_call(report: AuditReport, question: AuditQuestion, arrays: list[str]) -> str:
    """``report = dx.check_model(model, ...)``: every argument the audit was given."""
    args = ["model"]
    if question.sample_given and question.sample is not None:
        args.append("sample")
    keywords: dict[str, str] = {}
    if report.policy_override:
        keywords["policy"] = repr(report.policy_override)
    if report.backends:
        keywords["backends"] = python_code(list(report.backends))
    if report.mode != "call":
        keywords["mode"] = repr(report.mode)
    if question.steps != 1:
        keywords["steps"] = repr(question.steps)
    if question.labels_given and question.labels is not None:
        keywords["labels"] = "labels"
    if question.call_kwargs:
        keywords["call_kwargs"] = python_code(question.call_kwargs)
    if report.engine is not None:
        keywords["engine"] = repr(report.engine)
    if question.quantize is not None:
        keywords["quantize"] = (
            "quantize_config" if question.quantize_config else repr(question.quantize)
        )
    if question.timeout is not None:
        keywords["timeout"] = repr(question.timeout)
    body = ",\n".join(f"    {a}" for a in [*args, *(f"{k}={v}" for k, v in keywords.items())])
    given = [line for line in arrays if not line.startswith(("sample =", "labels ="))]
    if question.sample_given:
        given += [line for line in arrays if line.startswith("sample =")]
    if question.labels_given:
        given += [line for line in arrays if line.startswith("labels =")]
    if not question.sample_given and not question.labels_given:
        given = []
    heads = ["import dtype_explorer as dx"]
    if given:
        heads.append("import numpy as np")
        if needs_ml_dtypes(question.arrays):
            heads.append("import ml_dtypes")
    model = f"{report.model_class} {report.model!r}"
    pre = [
        f"# {FILL_IN}: `model` is your model (the {model} this report is about), e.g.",
        f'# model = keras.saving.load_model("{report.model}.keras")',
    ]
    if question.quantize_config:
        pre.append(
            f"# {FILL_IN}: `quantize_config` is your keras.quantizers.{question.quantize}(...)"
        )
    code = [*heads, "", *pre, *given, "", f"report = dx.check_model(\n{body},\n)", "print(report)"]
    return "\n".join(code)


def _head(report: AuditReport, question: AuditQuestion) -> list[str]:
    """The docstring (what it asks, what dtype-explorer found), the backend, the imports."""
    asked = f"{report.model_class} {report.model!r}"
    if report.policy_override:
        asked += f" rebuilt under policy {report.policy_override}"
    found = [f"  {f.severity}: {f.heading()} at {f.path}" for f in report.findings[:12]]
    doc = [
        f'"""{asked}, run as dtype-explorer audited it ({report.execution or "its call"}),'
        f" in raw Keras{f' {report.keras}' if report.keras else ''}.",
        "",
        f"dtype-explorer: {report.summary()}",
        *found,
        "",
        "Run it alone: python repro.py",
        '"""',
    ]
    lines = [*doc, "import os", "", f'os.environ["KERAS_BACKEND"] = "{report.backend}"', ""]
    lines += ["import keras", "import numpy as np"]
    if needs_ml_dtypes([*question.arrays, *(question.weights or ())]):  # bfloat16 weights too
        lines.append("import ml_dtypes")
    policy = report.policy_override or report.policy
    return [
        *lines,
        "",
        f"keras.config.set_dtype_policy({policy!r})  # the policy the model was built under",
        "",
    ]


def _model_lines(report: AuditReport, question: AuditQuestion) -> tuple[list[str], list[str]]:
    """The model: rebuilt from the recorded config, or loaded from a path to fill in."""
    if question.config is not None:
        lines = (
            ["# The model, made again from the config the audit recorded, with its weights"]
            if question.weights is not None
            else [
                "# The model, made again from the config the audit recorded: its weights are",
                "# fresh (a config holds none); the dtypes do not depend on them. To run yours:",
                f'# model = keras.saving.load_model("{report.model}.keras")',
            ]
        )
        if report.policy_override:
            lines.append(
                f"# (rebuilt under policy {report.policy_override} by check_model(policy=...):"
                " each layer's policy is in the config)"
            )
        lines += [
            f"config = {literal_text(question.config, 9)}",
            "model = keras.saving.deserialize_keras_object(config)",
            *_weight_lines(question),
        ]
        return [*lines, *_quantize_lines(question), ""], []
    why = question.model_note or "its config was not recorded"
    path = f"{report.model}.keras"
    lines = [
        f"# {FILL_IN}: the path of your model, saved with model.save({path!r}) (a config",
        f"# cannot make it again: {why}; load_model may need your custom_objects)",
        f"MODEL_PATH = {path!r}",
        "if not os.path.exists(MODEL_PATH):",
        '    raise SystemExit(f"' + FILL_IN + ': save your model to {MODEL_PATH} first")',
        "model = keras.saving.load_model(MODEL_PATH)",
    ]
    return [*lines, *_quantize_lines(question), ""], [f"MODEL_PATH: {path}, your saved model"]


def _weight_lines(question: AuditQuestion) -> list[str]:
    """``model.set_weights([...])`` with the audit's weights, where they were written down."""
    if question.weights is None:
        return []
    count = sum(math.prod(w.shape) for w in question.weights)
    arrays = [
        f"    {array_code(w.data.value(), 4)}," for w in question.weights if w.data is not None
    ]
    return [f"model.set_weights([  # the audit's weights ({count} values)", *arrays, "])"]


def _quantize_lines(question: AuditQuestion) -> list[str]:
    if question.quantize is None:
        return []
    if question.quantize_config:
        return [f"# {FILL_IN}: quantize with your keras.quantizers.{question.quantize}(...)"]
    mode, _, block = question.quantize.partition("/")
    config = (
        f", config=keras.quantizers.Int4QuantizationConfig(block_size={block})" if block else ""
    )
    return [f"model.quantize({mode!r}{config})"]


def _run_lines(report: AuditReport, question: AuditQuestion, names: list[str]) -> list[str]:
    """The model run in the audit's mode; ``y`` holds its outputs."""
    batch = question.arrays[0].shape[0] if question.arrays and question.arrays[0].shape else None
    keywords = "".join(f", {k}={python_code(v)}" for k, v in question.call_kwargs.items())
    if report.mode == "training":
        return ["", "y = model(sample, training=True)"]
    if report.mode == "predict":
        return ["", f"y = model.predict(sample, batch_size={batch}, verbose=0)"]
    if report.mode == "dataset":  # as check_model feeds it: a list of inputs is one x
        return [
            "",
            "import tensorflow as tf",
            "",
            "element = (tuple(sample),) if isinstance(sample, (list, tuple)) else sample",
            f"data = tf.data.Dataset.from_tensor_slices(element).batch({batch})",
            "y = model.predict(data, verbose=0)",
        ]
    if report.mode == "save":
        return [
            "",
            'model.save("roundtrip.keras")',
            'model = keras.saving.load_model("roundtrip.keras")',
            "y = model(sample)",
        ]
    if report.mode == "fit":
        return _fit_lines(report, question, batch)
    return ["", f"y = model(sample{keywords})"]


def _fit_lines(report: AuditReport, question: AuditQuestion, batch: Any) -> list[str]:
    """Compiled as the audit's copy was, trained ``steps`` steps on the sample; each step's
    loss, loss scale and whether the optimizer skipped it, printed."""
    loss = report.fit.loss if report.fit is not None else "mean_squared_error"
    compile_line = (
        f"model.compile_from_config({literal_text(question.compile_config, 28)})"
        if question.compile_config is not None
        else f"model.compile(optimizer=keras.optimizers.SGD(0.01), loss={loss!r})"
    )
    zeros = (
        'np.zeros(tuple(t.shape)[:-1], "int32")'
        if "sparse" in loss
        else 'np.zeros(tuple(t.shape), "float32")'
    )
    lines = ["", compile_line, "y = model(sample, training=True)"]
    if not question.labels_given:
        lines.append(f"labels = keras.tree.map_structure(lambda t: {zeros}, y)")
    return [
        *lines,
        "optimizer = model.optimizer",
        "scaling = isinstance(optimizer, keras.optimizers.LossScaleOptimizer)",
        "applying = optimizer.inner_optimizer if scaling else optimizer",
        "before = int(keras.ops.convert_to_numpy(applying.iterations))",
        f"for step in range(1, {question.steps} + 1):",
        f"    history = model.fit(sample, labels, batch_size={batch}, epochs=1, verbose=0,"
        " shuffle=False)",
        "    now = int(keras.ops.convert_to_numpy(applying.iterations))",
        "    scale = optimizer.dynamic_scale if scaling else None",
        "    scale = None if scale is None else float(keras.ops.convert_to_numpy(scale))",
        '    loss = history.history["loss"][0]',
        '    print(f"step {step}: loss {loss:.6g}, loss scale {scale}, skipped {now == before}")',
        "    before = now",
    ]


def _print_lines() -> list[str]:
    """Every layer's policy, compute and variable dtypes, and the outputs' dtypes."""
    return [
        "",
        "",
        *DTYPE_OF,
        "",
        "",
        "def layers_of(layer):",
        '    """Every layer inside ``layer``, nested models\' too."""',
        '    for inner in getattr(layer, "layers", []):',
        "        yield inner",
        "        yield from layers_of(inner)",
        "",
        "",
        'print("keras", keras.__version__, "on", keras.backend.backend())',
        "for layer in layers_of(model):",
        "    variables = {v.name: dtype_of(v) for v in layer.weights}",
        '    if hasattr(layer, "layers"):',
        "        variables = {}",
        '    print(f"layer {layer.name}: policy {layer.dtype_policy.name}, compute '
        '{layer.compute_dtype}, variables {variables}")',
        'print("output dtypes:", [dtype_of(t) for t in keras.tree.flatten(y)])',
    ]
