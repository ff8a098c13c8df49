"""Every expectation of an output dtype, side by side, and the verdict that uses the right one.

Four statements can be made about what a target should return:

* the **policy** rule: a layer computes in its compute dtype (float inputs autocast to it);
* **result_type**: ``keras.backend.result_type`` on this backend, Keras's promotion lattice;
* the **array libraries**: the op's counterpart in NumPy and in the probing backend's own
  library (``jax.numpy``, ``torch``, ``tf.experimental.numpy``), run on the same values: here,
  except ``tf.experimental.numpy``, which runs as it intends (NumPy behaviour on) in the
  TensorFlow reference process (:mod:`._tf_reference`); on openvino, which has no such
  library, the namesake in OpenVINO's op set (``references/_openvino.py``), which never
  decides a verdict (its ops do not promote: Keras's backend converts first);
* the **declared** spec: Keras's symbolic call.

Which one the verdict uses (``expected_by``), and why:

* a layer is judged by the policy rule wherever that rule fixes the dtype (every float input
  autocast to the compute dtype, or a layer that returns its compute dtype): it is what Keras
  documents for layers, and ``result_type`` is only how it gets there. Where the two disagree
  (``result_type('float64', 'float64')`` is ``float32`` on torch and numpy) that is reported
  as its own finding, and a layer that returns the policy's dtype is not a deviation;
* an op is judged by its Keras rule (``result_type`` of its inputs, or its bool/index/dtype=
  rule): Keras's lattice differs from NumPy's on purpose (weak scalars, floatx for int to
  float, no 64-bit defaults). Except where ``result_type`` narrows a float input the array
  libraries keep (``maximum`` of float64 is float64 in NumPy and torch, float32 by
  ``result_type`` on torch): there the libraries win, and the narrowing is a deviation;
* a user's layer whose call is one ``keras.ops`` function is judged by that op's expectation;
* the declared spec never decides the verdict; it disagreeing with the output is
  ``declared-mismatch``.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

import numpy as np

from dtype_explorer import dtypes
from dtype_explorer.errors import InvalidSpecError, first_line
from dtype_explorer.keras_run import _rules as rules
from dtype_explorer.keras_run import catalog
from dtype_explorer.keras_run.catalog import LayerEntry, OpEntry
from dtype_explorer.keras_run.references import (
    NO_COUNTERPART,
    call_reference,
    no_counterpart,
    openvino_path,
    openvino_said,
    openvino_why_none,
    tf_reference_run,
)
from dtype_explorer.records import Expectation, Verdict

#: The array library each backend's worker already imports, beside NumPy.
OWN_LIBRARY = {"jax": "jax", "torch": "torch", "tensorflow": "tensorflow"}
#: Verdicts from worst to best: the overall verdict is the worst of the outputs'.
_ORDER: tuple[Verdict, ...] = (
    "error",
    "deviates",
    "declared-mismatch",
    "as-documented",
    "undocumented",
)


def for_layer(
    entry: LayerEntry,
    *,
    compute_dtype: str,
    autocast_dtypes: tuple[str, ...],
    documented: rules.Documented,
    autocast: bool = True,
) -> list[Expectation]:
    """The policy rule's and ``result_type``'s expectations for a layer's output; a layer
    with ``autocast=False`` has no policy expectation (``rules.for_autocast_off``)."""
    found = []
    floats = {
        d
        for d, role in zip(autocast_dtypes, entry.input_roles(len(autocast_dtypes)))
        if role != "index" and dtypes.is_float(d)
    }
    if not autocast and entry.contract == "compute":
        pass  # the policy rule does not apply: result_type of what it computes with decides
    elif entry.contract in ("compute", "layer-dtype", "self-managed") and floats <= {compute_dtype}:
        found.append(
            Expectation(
                source="policy",
                dtype=compute_dtype,
                basis=f"the layer computes in its compute dtype {compute_dtype}",
            )
        )
    elif entry.contract == "passthrough" and len(set(autocast_dtypes)) == 1:
        found.append(
            Expectation(
                source="policy",
                dtype=autocast_dtypes[0],
                basis=f"passes its input through, as autocast: {autocast_dtypes[0]}",
            )
        )
    if documented.result_type_args:
        found.append(_result_type(documented))
    elif documented.dtype is None and documented.basis[-1:] and "raises" in documented.basis[-1]:
        found.append(Expectation(source="result_type", error=documented.basis[-1]))
    return found


def _result_type(documented: rules.Documented) -> Expectation:
    """Keras's ``result_type`` of the documented arguments, on this backend."""
    args = ", ".join(documented.result_type_args)
    return Expectation(
        source="result_type", dtype=documented.dtype, basis=f"result_type({args}) on this backend"
    )


def for_op(
    entry: OpEntry,
    documented: rules.Documented,
    inputs: tuple[dict, ...],
    leaves: list[tuple[dict, int | None, Any]],
    backend: str,
) -> list[Expectation]:
    """Keras's rule for the op, and the array libraries' answers on the same values
    (``inputs``: the op's argument structure as called; ``leaves``: every leaf of the call, in
    order, as NumPy values or Python numbers)."""
    found = []
    if entry.rule in ("promote", "promote-float") and documented.result_type_args:
        found.append(_result_type(documented))
    elif entry.rule in ("bool", "index", "dtype-arg") and documented.dtype is not None:
        found.append(
            Expectation(source="result_type", dtype=documented.dtype, basis=documented.basis[-1])
        )
    for library in dict.fromkeys(("numpy", OWN_LIBRARY.get(backend, "numpy"))):
        path = entry.references.get(library)
        if path is not None and leaves and library == "tensorflow":
            found.append(_tensorflow_expectation(path, entry, inputs, leaves))
        elif path is not None and leaves:
            found.append(library_expectation(library, path, entry, inputs, leaves))
    if backend == "openvino" and leaves:
        found.append(_openvino_expectation(entry, inputs, leaves))
    return found


def _openvino_expectation(
    entry: OpEntry, inputs: tuple[dict, ...], leaves: list[tuple[dict, int | None, Any]]
) -> Expectation:
    """The op set's namesake of the op on the same values (:mod:`.references._openvino`),
    or why it has none."""
    path = openvino_path(entry.name)
    why = openvino_why_none(entry.name, [i.get("kind", "") for i in inputs], dict(entry.kwargs))
    if why is not None:
        return Expectation(
            source="openvino", basis=f"{path}: {NO_COUNTERPART}: {why}", no_counterpart=why
        )
    return library_expectation("openvino", path, entry, inputs, leaves)


def _tensorflow_expectation(
    path: str, entry: OpEntry, inputs: tuple[dict, ...], leaves: list[tuple[dict, int | None, Any]]
) -> Expectation:
    """:func:`library_expectation` for ``tf.experimental.numpy``, as it intends: with its NumPy
    behaviour on, in the TensorFlow reference process (:mod:`._tf_reference`), never in this
    one, which answers for Keras."""
    if no_counterpart(path) is not None:
        return library_expectation("tensorflow", path, entry, inputs, leaves)
    try:
        return tf_reference_run(library_expectation, "tensorflow", path, entry, inputs, leaves)
    except Exception as error:  # the reference process itself failed: not tnp's answer
        message = f"the TensorFlow reference process failed: {type(error).__name__}: {error}"
        return Expectation(
            source="tensorflow", basis=path, error=first_line(message)[:200], tool_failed=True
        )


def library_expectation(
    library: str,
    path: str,
    entry: OpEntry,
    inputs: tuple[dict, ...],
    leaves: list[tuple[dict, int | None, Any]],
) -> Expectation:
    """The dtype ``library``'s counterpart of the op returns on the same values."""
    _, convert, name_of = array_library(library)
    replay = iter(leaves)

    def value(_leaf: dict, _i: int | None) -> Any:
        _, _, made = next(replay)
        if convert is None or isinstance(made, (bool, int, float)):
            return made
        return convert(np.asarray(made))

    missing = no_counterpart(path)
    if missing is not None:
        return Expectation(
            source=library, basis=f"{path}: {NO_COUNTERPART}: {missing}", no_counterpart=missing
        )
    try:
        fn = resolve_function(path)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            args, _ = catalog.op_calls.build(inputs, value)
            out = call_reference(path, fn, tuple(args), dict(entry.kwargs), entry.name)
            dtype = _python_value(out) or name_of(out)
    except Exception as error:
        said = openvino_said(error) if library == "openvino" else first_line(str(error))
        return Expectation(
            source=library, error=f"{type(error).__name__}: {said}"[:200], basis=path
        )
    if dtype.startswith("python_"):
        return Expectation(source=library, dtype=dtype, basis=path)
    if isinstance(out, np.ndarray) and dtypes.is_text_array(out):
        dtype = "string"  # NumPy's text (object, str_): what Keras names string
    if dtype not in dtypes.all_input_dtypes():
        unnamed = f"{library} answers {dtype}, which Keras has no dtype for"
        return Expectation(
            source=library, basis=f"{path}: {NO_COUNTERPART}: {unnamed}", no_counterpart=unnamed
        )
    return Expectation(source=library, dtype=dtypes.standardize(dtype), basis=path)


def _python_value(out: Any) -> str | None:
    """``python_int`` (``python_float``, ``python_bool``) for a library answering with a Python
    number (``jnp.size``, ``torch.numel``) or a tuple of them (``jnp.shape``,
    ``torch.Tensor.size``), as the probe names Keras's own; else ``None``."""
    out = _first(out)
    for kind in (bool, int, float):
        if isinstance(out, kind):
            return f"python_{kind.__name__}"
    return None


def wrapped_op(trace: Any, observed: str | None) -> tuple[OpEntry, tuple[str, ...]] | None:
    """The ``keras.ops`` function a user's layer's call amounts to: the one op of its call
    (Keras's conversion of the inputs aside) whose output is the layer's output, with its
    input dtypes; ``None`` otherwise."""
    steps = [s for s in trace if s.phase == "call" and "convert_to_tensor" not in s.op]
    if len(steps) != 1 or not steps[0].outputs or steps[0].outputs[0].dtype != observed:
        return None
    name = steps[0].op if steps[0].op.startswith("ops.") else f"ops.{steps[0].op.split('.')[-1]}"
    try:
        entry = catalog.entry(name)
    except InvalidSpecError:
        return None
    if not isinstance(entry, OpEntry) or entry.rule not in ("promote", "promote-float"):
        return None
    return entry, tuple(t.dtype for t in steps[0].inputs if t.dtype)


def sampled_ids(
    trace: Any, observed: str | None, expectations: list[Expectation]
) -> tuple[str, list[Expectation]] | None:
    """A user's layer whose output is a ``keras.random`` sampler's ids (``categorical``,
    ``randint``: integer samples, in the dtype their ``dtype=`` argument asks): why the policy
    rule does not judge it, and the expectations without it; else ``None``. The policy's
    compute dtype is the dtype of the layer's float computations, not of sampled ids."""
    if observed is None or dtypes.family(observed) not in ("int", "uint"):
        return None
    steps = [s for s in trace if s.phase == "call" and s.outputs]
    last = steps[-1] if steps else None
    if last is None or not last.op.startswith("random.") or last.outputs[0].dtype != observed:
        return None
    why = f"its output is keras.{last.op}'s sampled ids, in the dtype its dtype= argument asks"
    return why, [e for e in expectations if e.source not in ("policy", "result_type")]


def winner(
    expectations: list[Expectation], *, kind: str, converted: tuple[str, ...] = ()
) -> Expectation | None:
    """The expectation the verdict uses (see the module's docstring for why)."""
    by = {e.source: e for e in expectations if e.dtype is not None}
    if kind == "layer":
        return by.get("policy") or by.get("result_type")
    rt = by.get("result_type")
    floats = [d for d in converted if dtypes.family(d) == "float"]
    widest = max(floats, key=lambda d: dtypes.bits(d) or 0, default=None)
    if rt is not None and widest is not None and dtypes.narrows(widest, rt.dtype or ""):
        keeping = [
            e for e in expectations if e.source in OWN_LIBRARY.values() or e.source == "numpy"
        ]
        kept = [e for e in keeping if e.dtype == widest]
        if kept:
            return kept[-1]  # the backend's own library before NumPy, when both keep it
    return rt


def verdicts(
    expected: str | None,
    declared: tuple[str, ...],
    observed: tuple[str, ...],
    *,
    own: dict[int, str | None] | None = None,
) -> tuple[tuple[Verdict, ...], Verdict]:
    """One verdict per output, and the worst of them. The expected dtype applies to the first
    output and to every other output of its family (an LSTM's states); an output of another
    family (``top_k``'s indices) is judged only against its declared dtype. An output in
    ``own`` is judged by its own expectation instead (:func:`named_output_expectations`;
    ``None``: Keras states none, so ``undocumented`` unless the declared dtype disagrees)."""
    each: list[Verdict] = []
    for i, got in enumerate(observed):
        said = declared[i] if i < len(declared) else None
        applies = i == 0 or (
            expected is not None and dtypes.family(said or got) == dtypes.family(expected)
        )
        documented = own[i] if own is not None and i in own else expected if applies else None
        each.append(rules.verdict(status="ok", documented=documented, declared=said, observed=got))
    if not each:
        return (), rules.verdict(status="ok", documented=expected, declared=None, observed=None)
    return tuple(each), min(each, key=_ORDER.index)


def named_output_expectations(
    layer: Any, names: list[str], given: dict[str, str]
) -> dict[int, tuple[str | None, str]]:
    """Each named output of an image preprocessing layer's dict (``images``,
    ``segmentation_masks``, ``bounding_boxes/boxes``, ``labels``) but its ``images``, with the
    expectation Keras's own code states for it and why: ``(dtype, basis)``, ``dtype`` ``None``
    where Keras states none. ``given``: each input's dtype by its name.

    Keras's ``BaseImagePreprocessingLayer.transform_images`` casts the images to the compute
    dtype (the policy rule judges them); its ``transform_segmentation_masks`` transforms the
    masks with ``"nearest"`` interpolation and never casts them: a layer that keeps it keeps
    the masks' input dtype. A layer that overrides it (``RandomFlip`` routes masks through
    ``transform_images``; a user's subclass may do anything), bounding boxes and labels: no
    dtype stated by Keras, so ``undocumented``, never ``deviates``."""
    from keras.src.layers.preprocessing.image_preprocessing.base_image_preprocessing_layer import (
        BaseImagePreprocessingLayer as Base,
    )

    if not isinstance(layer, Base):
        return {}
    found: dict[int, tuple[str | None, str]] = {}
    cls = type(layer).__name__
    for i, name in enumerate(names):
        if name == "images":
            continue
        inherited = type(layer).transform_segmentation_masks is Base.transform_segmentation_masks
        if name == "segmentation_masks" and inherited and name in given:
            found[i] = (
                given[name],
                f"{name}: {given[name]} kept, as Keras's BaseImagePreprocessingLayer."
                "transform_segmentation_masks keeps masks ('nearest' interpolation, no cast)",
            )
        elif name == "segmentation_masks":
            found[i] = (
                None,
                f"{name}: {cls} overrides transform_segmentation_masks; Keras states no dtype "
                "for its masks",
            )
        else:
            found[i] = (None, f"{name}: Keras states no dtype rule for this output of {cls}")
    return found


def array_library(library: str) -> tuple[Any, Any, Any]:
    """``(module, convert, name_of)`` for an array library: its NumPy API, how a NumPy array
    becomes its array, and how its result's dtype is named."""
    if library == "numpy":
        return np, None, lambda out: np.asarray(_first(out)).dtype.name
    if library == "jax":
        import jax.numpy as jnp

        return jnp, jnp.asarray, lambda out: np.dtype(_first(out).dtype).name
    if library == "torch":
        import torch

        def to_torch(array: np.ndarray) -> Any:
            name = array.dtype.name
            if name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):  # no NumPy twin in torch
                return torch.from_numpy(array.astype(np.float32)).to(getattr(torch, name))
            return torch.from_numpy(np.ascontiguousarray(array))

        return torch, to_torch, lambda out: str(_first(out).dtype).removeprefix("torch.")
    if library == "tensorflow":
        import tensorflow as tf

        return tf.experimental.numpy, tf.constant, lambda out: _first(out).dtype.name
    if library == "openvino":
        return _openvino_opset()
    raise InvalidSpecError(
        f"no array library {library!r}; valid: 'numpy', 'jax', 'torch', 'tensorflow', 'openvino'"
    )


def _openvino_opset() -> tuple[Any, Any, Any]:
    """OpenVINO's op set as :func:`array_library` gives a library: values become constants
    (bfloat16, which OpenVINO's Python constants do not take, a float32 constant converted to
    ``bf16``), and an answer's dtype is its output element type, named as Keras's openvino
    backend names it (``ov_to_keras_type``), or as OpenVINO does where Keras has no name."""
    import openvino.opset16 as opset
    from keras.src.backend.openvino.core import ov_to_keras_type

    def constant(array: np.ndarray) -> Any:
        if array.dtype.name == "bfloat16":
            return opset.convert(opset.constant(array.astype(np.float32)), "bf16")
        return opset.constant(array)

    def name_of(out: Any) -> str:
        element = _first(out).get_output_element_type(0)
        try:
            return ov_to_keras_type(element)
        except ValueError:
            return element.get_type_name()

    return opset, constant, name_of


def resolve_function(path: str) -> Any:
    """The function at ``path`` (``"tensorflow.experimental.numpy.add"``): the longest module
    prefix imported, the rest read as attributes."""
    parts = path.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            found: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            found = getattr(found, part)
        return found
    raise InvalidSpecError(f"no function {path!r}")


def _first(out: Any) -> Any:
    """The first array of a result (``torch.max`` and friends return tuples)."""
    while isinstance(out, (tuple, list)) and out:
        out = out[0]
    return out
