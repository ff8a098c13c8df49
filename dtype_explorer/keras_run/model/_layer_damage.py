"""Damage per layer against a wider reference: the model and its float32 copy (same weights,
``policy_clone``) each run once on the same sample, every leaf layer's outputs kept; each
output compared (``records.LayerDamage``: relative RMS error, SQNR, max abs error, amax and
headroom, and the reference's own amax of the output and of the call's inputs). Used by
``check_model`` when a layer computes in a 16-bit float, which hands in the model's leaf
outputs from its traced pass (``ModelTracer.leaf_outputs``: the same model, weights and
sample), so that only the float32 copy runs here.

>>> import keras, numpy as np
>>> inputs = keras.Input((4,))
>>> dense = keras.layers.Dense(3, dtype="mixed_float16", name="d")
>>> model = keras.Model(inputs, dense(inputs), name="m")
>>> [(d.path, d.dtype, d.reference) for d in layer_damage(model, np.ones((2, 4), "float32"))]
[('m/d', 'float16', 'float32')]
"""

from __future__ import annotations

import contextlib
import math
from typing import Any, NamedTuple

import numpy as np

from dtype_explorer import dtypes, float_bits
from dtype_explorer.keras_run._arrays import abstract, numpy_values
from dtype_explorer.keras_run.model._copy import policy_clone
from dtype_explorer.keras_run.model._input_fix import DtypeCopies, with_dtype
from dtype_explorer.keras_run.model._model_trace import layer_paths
from dtype_explorer.keras_run.model._samples import keras_flatten
from dtype_explorer.keras_run.trace import wrapped_entry_points
from dtype_explorer.records import LayerDamage

#: The reference dtype of the per-layer comparison.
REFERENCE = "float32"


def layer_outputs(model: Any, sample: Any, kwargs: dict[str, Any] | None = None) -> dict:
    """Every leaf layer call's float outputs as NumPy arrays, by ``(path below the model,
    call index)``, from one plain call of ``model`` (entry points wrapped on the instances,
    put back after).

    Args:
        model: a built Keras model.
        sample: what the model is called on.
        kwargs: the call's keyword arguments (``training=False`` by default where taken).

    Returns:
        ``{(path, index): (layer_class, [arrays])}``.
    """
    return run_leaves(model, sample, kwargs)[0]


def run_leaves(
    model: Any,
    sample: Any,
    kwargs: dict[str, Any] | None = None,
    input_amax: dict[tuple[str, int], float | None] | None = None,
    traced: list[str] | None = None,
) -> tuple[dict, Any]:
    """:func:`layer_outputs`, and what the model's call returned; ``input_amax``, where
    given, is filled with each leaf call's largest finite ``|x|`` of its float inputs, and
    ``traced`` with the path of each leaf call made inside a jax transformation (left out:
    its tensors are tracers, with no values)."""
    found: dict[tuple[str, int], tuple[str, list[np.ndarray]]] = {}
    counts: dict[int, int] = {}
    paths = layer_paths(model)

    def wrap(layer: Any, path: str, _name: str, original: Any) -> Any:
        def call(*args: Any, **kw: Any) -> Any:
            out = original(*args, **kw)
            index = counts.get(id(layer), 0)
            counts[id(layer)] = index + 1
            if any(abstract(t) for t in keras_flatten((args, kw, out))):
                if traced is not None and path not in traced:
                    traced.append(path)
                return out  # a call inside a jax scan (a recurrent cell's): no values to read
            if input_amax is not None:
                input_amax[(path, index)] = _amax(args)
            arrays = [
                numpy_values(t)
                for t in keras_flatten(out)
                if dtypes.family(dtypes.describe(t)) == "float"
            ]
            found[(path, index)] = (type(layer).__name__, arrays)
            return out

        return call

    root = model.name
    with contextlib.ExitStack() as stack:
        for layer, path, _ in paths.values():
            leaf = not any(c is not layer for c in layer._flatten_layers(include_self=False))
            if leaf and layer is not model:
                below = path.removeprefix(root + "/")
                stack.enter_context(
                    wrapped_entry_points(layer, lambda n, o, la=layer, p=below: wrap(la, p, n, o))
                )
        returned = model(sample, **(kwargs or {}))
    return found, returned


def layer_damage(
    model: Any,
    sample: Any,
    kwargs: dict[str, Any] | None = None,
    outputs: dict | None = None,
    original: Any = None,
    reference: str = REFERENCE,
    copies: DtypeCopies | None = None,
    traced: list[str] | None = None,
) -> tuple[LayerDamage, ...]:
    """Each leaf layer output of ``model`` against the same model in float32 (or, with
    ``reference="float64"``, against it made again in float64, its float Inputs too: what
    float64 data narrowed to a float32 model cost).

    Args:
        model: a Sequential or Functional Keras model (``policy_clone`` rebuilds it).
        sample: what the model is called on.
        kwargs: the call's keyword arguments.
        outputs: ``model``'s leaf outputs on ``sample`` as :func:`layer_outputs` gives them,
            from a pass already run (the audit's traced one); ``None``: ``model`` runs here.
        original: the model ``model`` was rebuilt from (``policy=``): the reference itself
            where it is float32 throughout (:func:`float32_original`) and the call does not
            train (it would move its statistics); else, or ``None``, ``policy_clone`` makes
            the reference.
        reference: its dtype, ``"float32"`` or ``"float64"`` (``with_dtype`` makes that one).
        copies: ``model``'s copies in another dtype made for its audit (the float64 one is
            then made once for the reference and the fix); ``None``: made here.
        traced: filled with the paths (below the model) of the leaf calls left out because
            the reference made them inside a jax transformation (an LSTM's cell, run in
            ``jax.lax.scan``): their tensors are tracers.

    Returns:
        One ``LayerDamage`` per float output of each leaf call, in forward order.

    Raises:
        ValueError: the float64 copy did not compute in float64 (jax without
            ``jax_enable_x64``, said as the cause there only): no reference to measure
            against.
    """
    trains = bool((kwargs or {}).get("training"))
    usable = original is not None and original is not model and not trains
    if reference == "float64":
        wide = with_dtype(model, "float64", copies)
    elif usable and float32_original(original, model):
        wide = original
    else:
        wide = policy_clone(model, REFERENCE)
    got = layer_outputs(model, sample, kwargs) if outputs is None else outputs
    inputs: dict[tuple[str, int], float | None] = {}
    theirs = run_leaves(wide, sample, kwargs, inputs, traced)[0]
    held = {dtypes.describe(a) for _, arrays in theirs.values() for a in arrays}
    if reference == "float64" and held - {"float64"}:
        import keras

        why = " (jax holds float64 only with jax_enable_x64 set)"
        raise ValueError(
            f"its float64 copy computed in {', '.join(sorted(held - {'float64'}))} on this "
            f"backend{why if keras.backend.backend() == 'jax' else ''}"
        )
    want = _aligned(got, theirs)
    taken = _aligned(got, {key: ("", value) for key, value in inputs.items()}, theirs)
    damage = []
    for (path, index), (layer_class, arrays) in got.items():
        refs = want.get((path, index), ("", []))[1]
        for i, (out, ref) in enumerate(zip(arrays, refs, strict=False)):
            if out.shape == ref.shape and out.size:
                found = compare(out, ref, path=f"{model.name}/{path}", layer_class=layer_class,
                                call_index=index, output=i)  # fmt: skip
                given = taken.get((path, index), ("", None))[1]
                damage.append(found.model_copy(update={"reference_input_amax": given}))
    return tuple(damage)


def float32_original(model: Any, rebuilt: Any) -> bool:
    """Whether ``model`` is itself the float32 reference of ``rebuilt`` (its rebuild under
    another policy, holding its weights): it and every layer in it under ``float32``, and
    ``rebuilt``'s weights of the same dtypes and shapes (so the same values: a mixed policy
    keeps float32 variables). Its float32 clone would be the same model again.

    >>> import keras
    >>> inputs = keras.Input((3,))
    >>> model = keras.Model(inputs, keras.layers.Dense(2)(inputs))
    >>> float32_original(model, policy_clone(model, "mixed_float16"))
    True
    >>> float32_original(model, policy_clone(model, "float16"))  # float16 weights
    False
    """
    import keras

    layers = model._flatten_layers(include_self=True, recursive=True)
    if any(
        getattr(getattr(layer, "dtype_policy", None), "name", REFERENCE) != REFERENCE
        for layer in layers
        if not isinstance(layer, keras.layers.InputLayer)
    ):
        return False
    ours, theirs = model.weights, rebuilt.weights
    return len(ours) == len(theirs) and all(
        a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape)
        for a, b in zip(ours, theirs, strict=True)
    )


def _amax(structure: Any) -> float | None:
    """The largest ``|x|`` of the float tensors in ``structure`` (``None``: none; inf or NaN
    where a tensor holds one): ``float_bits.finite_peak``, a 16-bit float read on its bits."""
    found = None
    for t in keras_flatten(structure):
        if dtypes.family(dtypes.describe(t)) != "float":
            continue
        values = numpy_values(t)
        if not values.size:
            continue
        peak = float_bits.finite_peak(values)
        if peak is None:  # an inf or NaN: what the two reductions of the widened values say
            wide = float_bits.widened(values)
            peak = float(max(wide.max(), -wide.min()))
        found = peak if found is None else max(found, peak)
    return found


def _aligned(got: dict, want: dict, classes: dict | None = None) -> dict:
    """The reference's outputs keyed as ``got``'s: call by call, in the order the layers ran,
    where both ran the same classes in the same order (a rebuilt model names the sublayers
    it makes afresh ``softmax_2`` where the model has ``softmax``: keras-hub's attention);
    else by path. ``classes``: the reference's calls with their classes, where ``want``'s
    values carry none (keyed and ordered as ``want``)."""
    ours, theirs = list(got.items()), list(want.items())
    named = list((classes or want).values())
    if [c for _, (c, _) in ours] != [c for c, _ in named]:
        return want
    return {key: value for (key, _), (_, value) in zip(ours, theirs, strict=True)}


def compare(out: np.ndarray, ref: np.ndarray, **where: Any) -> LayerDamage:
    """One output against its reference (``records.LayerDamage``), in float64.

    Where every value of both is finite (most outputs), each array's peak is read first
    (``float_bits.finite_peak``: a 16-bit output on its bits), the output's smallest nonzero
    magnitude too (``float_bits.smallest_nonzero``), and the sums are made a slice at a time
    (:func:`_sums`: two float64 slices that stay in a core's cache, where two float64 copies
    of the whole output, 8x a float16 output's bytes, took more time than the sums and that
    much memory). The masked path (:func:`_compare_masked`) takes the rest.
    """
    dtype = dtypes.describe(out)
    amax, reference_amax = float_bits.finite_peak(out), float_bits.finite_peak(ref)
    if amax is None or reference_amax is None or not out.size:
        return _compare_masked(out, ref, dtype, where)
    smallest = float_bits.smallest_nonzero(out)
    sums = _sums(out.reshape(-1), ref.reshape(-1))
    return _damage(where, dtype, ref, sums, amax, smallest, 0, reference_amax)


#: How many values :func:`_sums` widens to float64 at a time: two such slices (512 KiB) stay
#: in a core's cache, and the slices are few enough that their Python costs nothing
#: (ResNet50's largest output at 224x224, 1.6 M values: 8.1 ms with whole float64 copies,
#: 3.5 ms a slice at a time).
SLICE = 1 << 15


class _Sums(NamedTuple):
    """What a comparison adds up, in float64: ``sum(r**2)``, ``sum((o - r)**2)``, ``max |o -
    r|`` and how many values."""

    signal: float
    noise: float
    max_abs_error: float
    compared: int


def _sums(out: np.ndarray, ref: np.ndarray) -> _Sums:
    """:class:`_Sums` of two flat arrays of the same size, each widened to float64 a
    :data:`SLICE` at a time: the float64 differences and squares of whole copies, each sum
    added up a slice after another (so it may differ from one over whole copies in its last
    bits)."""
    n = out.size
    wide_out, wide_ref = np.empty(min(n, SLICE)), np.empty(min(n, SLICE))
    signal = noise = 0.0
    high, low = -math.inf, math.inf
    for start in range(0, n, SLICE):
        stop = min(n, start + SLICE)
        o, r = wide_out[: stop - start], wide_ref[: stop - start]
        o[...], r[...] = out[start:stop], ref[start:stop]
        # einsum, not np.dot: BLAS's threads cost 100x on a loaded machine for one sum
        signal += float(np.einsum("i,i->", r, r))
        diff = np.subtract(o, r, out=o)
        noise += float(np.einsum("i,i->", diff, diff))
        high, low = max(high, float(diff.max())), min(low, float(diff.min()))
    return _Sums(signal, noise, max(high, -low, 0.0) if n else 0.0, n)


def _compare_masked(out: np.ndarray, ref: np.ndarray, dtype: str, where: dict) -> LayerDamage:
    """:func:`compare` where a value is inf or NaN (or the arrays are empty): the error over
    the values finite in both, the amax over the output's finite ones."""
    o, r = out.astype(np.float64).ravel(), ref.astype(np.float64).ravel()
    # each array's two ends read once: whether all is finite, and its amax where it is
    ends_o, ends_r = _ends(o), _ends(r)
    finite_o, finite_r = _finite(o, ends_o), _finite(r, ends_r)
    keep = (True if finite_o is None else finite_o) & (True if finite_r is None else finite_r)
    both = (o, r) if keep is True else (o[keep], r[keep])
    seen = o if finite_o is None else o[finite_o]
    wanted = r if finite_r is None else r[finite_r]
    amax = _peak(seen) if finite_o is not None else _span(ends_o)
    magnitude = np.abs(seen)
    smallest = float(np.min(magnitude, where=magnitude > 0, initial=np.inf)) if seen.size else 0.0
    reference_amax = _peak(wanted) if finite_r is not None else _span(ends_r)
    sums = _sums(*both)
    return _damage(where, dtype, ref, sums, amax, smallest, o.size - seen.size, reference_amax)


def _damage(
    where: dict,
    dtype: str,
    ref: np.ndarray,
    sums: _Sums,
    amax: float | None,
    smallest: float,
    nonfinite: int,
    reference_amax: float | None,
) -> LayerDamage:
    """The record of one comparison, from its :class:`_Sums` over the values compared."""
    signal, noise = sums.signal, sums.noise
    n = max(sums.compared, 1)
    rel = math.sqrt(noise / n) / max(math.sqrt(signal / n), 1e-300)
    big, tiny = dtypes.float_limits(dtype)
    return LayerDamage(
        **where,
        dtype=dtype,
        reference=dtypes.describe(ref),
        rel_rms=rel,
        sqnr_db=None if noise == 0 else 10 * math.log10(max(signal, 1e-300) / noise),
        max_abs_error=sums.max_abs_error,
        amax=amax,
        top_bits=math.log2(big / amax) if amax else None,
        bottom_bits=math.log2(smallest / tiny) if 0 < smallest < math.inf else None,
        nonfinite=nonfinite,
        compared=sums.compared,
        reference_amax=reference_amax,
    )


def _ends(values: np.ndarray) -> tuple[float, float] | None:
    """``(max, min)`` of ``values`` (``None``: empty)."""
    return (float(values.max()), float(values.min())) if values.size else None


def _span(ends: tuple[float, float] | None) -> float | None:
    """``max |x|`` from :func:`_ends` (``None``: empty)."""
    return None if ends is None else max(ends[0], -ends[1])


def _finite(values: np.ndarray, ends: tuple[float, float] | None) -> np.ndarray | None:
    """``None`` where every value is finite (its two ends are), else the mask."""
    if ends is None or (math.isfinite(ends[0]) and math.isfinite(ends[1])):
        return None
    return np.isfinite(values)


def _peak(values: np.ndarray) -> float | None:
    """``max |x|`` of finite values (``None``: none)."""
    return float(max(values.max(), -values.min())) if values.size else None
