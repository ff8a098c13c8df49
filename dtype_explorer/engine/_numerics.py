"""Numerical side effects of a dtype: overflow to inf/NaN, and error against higher precision."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from dtype_explorer import dtypes
from dtype_explorer.records import CastStep, Numerics


def reference_dtype(backend: str) -> str:
    """The widest float a backend computes in: float64 on TensorFlow and torch; JAX (x64 off)
    and NumPy-backed Keras keep float32."""
    return "float64" if backend in ("tensorflow", "torch") else "float32"


def measure(
    outputs: Any,
    samples: list[Any],
    steps: list[CastStep],
    *,
    reference: Callable[[str], Any] | None,
) -> Numerics:
    """Count inf/NaN made from finite input; compare with ``reference(dtype)`` when the path
    narrowed a float (16-bit compute, or float64 data computed in float32)."""
    import keras

    out = _first_float(outputs)
    if out is None:
        return Numerics(note="no float output")
    finite_input = all(_finite(s) for s in samples)
    fields: dict[str, Any] = {
        "output_count": int(out.size),
        "nonfinite_from_finite": int(np.sum(~np.isfinite(out))) if finite_input else 0,
        "max_abs_output": float(np.max(np.abs(out[np.isfinite(out)])))
        if np.isfinite(out).any()
        else None,
    }
    notes = [] if finite_input else ["the input itself holds inf/NaN in this dtype"]
    wide = reference_dtype(keras.backend.backend())
    narrowest = min((_float_bits(s.dtype, 99) for s in steps if s.stage != "input"), default=99)
    given_widest = max((_float_bits(s.dtype, 0) for s in steps if s.stage == "input"), default=0)
    narrowed = narrowest == 16 or (given_widest > narrowest and narrowest < 99)
    if reference is None or not narrowed:
        notes.append("no narrowing on the path; no reference run")
    elif _float_bits(wide, 0) <= narrowest:
        notes.append(f"{keras.backend.backend()} computes no wider than {wide}; no reference run")
    else:
        try:
            ref = _first_float(reference(wide))
            fields["reference_dtype"] = wide
            fields["max_rel_error"] = _relative_error(out, ref)
            notes.append(f"max |out - ref| / max |ref| against the same weights in {wide}")
        except Exception as error:
            notes.append(f"reference run failed: {type(error).__name__}")
    return Numerics(**fields, note="; ".join(notes))


def _float_bits(dtype: str, default: int) -> int:
    """The bits of a float16/bfloat16/float32/float64 dtype (float8, which Keras only stores,
    never computes in, and any other dtype: ``default``)."""
    return (dtypes.bits(dtype) or default) if dtypes.family(dtype) == "float" else default


def _first_float(outputs: Any) -> np.ndarray | None:
    import keras

    for tensor in keras.tree.flatten(outputs):
        if hasattr(tensor, "dtype") and keras.backend.is_float_dtype(
            keras.backend.standardize_dtype(tensor.dtype)
        ):
            return np.asarray(keras.ops.convert_to_numpy(tensor)).astype(np.float64)
    return None


def _finite(sample: Any) -> bool:
    try:
        array = np.asarray(sample)
        if array.dtype.kind == "c":  # complex: both parts (float64 would drop the imaginary)
            return bool(np.all(np.isfinite(array)))
        return bool(np.all(np.isfinite(array.astype(np.float64))))
    except (TypeError, ValueError):
        return True


def _relative_error(out: np.ndarray, ref: np.ndarray | None) -> float | None:
    if ref is None or ref.shape != out.shape:
        return None
    mask = np.isfinite(out) & np.isfinite(ref)
    if not mask.any():
        return None
    scale = float(np.max(np.abs(ref[mask]))) or 1.0
    return float(np.max(np.abs(out[mask] - ref[mask])) / scale)
