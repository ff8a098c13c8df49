"""Where each step of an op trace ran, and the kernel path the backend took where it tells.

``tensor_device`` names the device of a step's first output (the trace calls it as it records
outputs). :func:`placed` then adds each step's kernel path, read from the step's own record:

* torch's int8 matmul: ``keras.src.backend.torch.numpy.matmul`` calls ``torch._int_mm`` only on
  CUDA, for two 2-D int8 inputs within its shape limits; otherwise it casts and multiplies
  (to ``floatx`` on CUDA, to int32 on the CPU) and casts back. :func:`torch_int8_kernel` reads
  the same condition from the step's device, dtypes and shapes.
* XLA: every step of a run compiled by ``jax.jit`` or by ``tf.function`` with XLA ran compiled.

>>> from dtype_explorer.records import TraceStep, TraceTensor
>>> t = TraceTensor(dtype="int8", shape=(32, 64))
>>> torch_int8_kernel(TraceStep(index=0, op="ops.matmul", inputs=(t, t), device="cpu"))
'int32 fallback (cpu: torch._int_mm is CUDA-only)'
>>> w = TraceTensor(dtype="int8", shape=(64, 16))
>>> torch_int8_kernel(TraceStep(index=0, op="ops.matmul", inputs=(t, w), device="cuda:0"))
'torch._int_mm'
"""

from __future__ import annotations

from typing import Any

from dtype_explorer.records import ProbeSpec, TraceStep, TraceTensor


def tensor_device(value: Any) -> str | None:
    """The device of a concrete tensor (``"cpu"``, ``"cuda:0"``, ``"gpu:0"``), ``None`` for
    anything else (a symbolic tensor, a tracer, a NumPy array on the numpy backend: ``"cpu"``)."""
    try:
        if hasattr(value, "devices"):  # jax (a tracer raises)
            device = next(iter(value.devices()))
            return f"{device.platform}:{device.id}"
        device = getattr(value, "device", None)
        if device is None:
            return "cpu" if type(value).__module__ == "numpy" else None
        text = str(device)
    except Exception:
        return None
    if text.startswith("/job"):  # tensorflow: /job:localhost/replica:0/task:0/device:GPU:0
        return text.rsplit("device:", 1)[-1].lower()
    return text or None


def torch_int8_kernel(step: TraceStep) -> str | None:
    """The kernel path of an int8 x int8 matmul step on torch, by Keras's own condition
    (``keras.src.backend.torch.numpy.matmul``'s ``can_use_int_matmul``); ``None`` for any other
    step."""
    if not step.op.endswith("matmul") or len(step.inputs) < 2:
        return None
    x1, x2 = step.inputs[0], step.inputs[1]
    if x1.dtype != "int8" or x2.dtype != "int8":
        return None
    device = step.device or "cpu"
    if not device.startswith("cuda"):
        return f"int32 fallback ({device}: torch._int_mm is CUDA-only)"
    why = _int_mm_refusal(x1.shape, x2.shape)
    if why:
        return f"float fallback ({device}: {why}; int8 cast to floatx, multiplied, cast back)"
    return "torch._int_mm"


def _int_mm_refusal(a: tuple, b: tuple) -> str:
    """Why ``torch._int_mm`` does not take these shapes (``""``: it does)."""
    if len(a) != 2 or len(b) != 2:
        return f"{max(len(a), len(b))}-D input, torch._int_mm takes 2-D"
    if None in a or None in b:
        return "unknown shape"
    if a[0] <= 16 or a[1] < 16 or a[1] % 8:
        return f"x1 shape {a}: needs rows > 16, cols >= 16 and a multiple of 8"
    if b[0] < 16 or b[0] % 8 or b[1] % 8:
        return f"x2 shape {b}: needs rows >= 16 and a multiple of 8, cols a multiple of 8"
    return ""


def placed(
    trace: tuple[TraceStep, ...], backend: str, execution: str, compiled: bool | None
) -> tuple[TraceStep, ...]:
    """``trace`` with each step's kernel path (``TraceStep.kernel``) where the backend tells:
    torch's int8 matmuls, and every step of an XLA-compiled run (``execution`` says how the
    run was compiled, ``compiled`` whether)."""
    xla = None
    if compiled and (backend == "jax" or "XLA" in execution):
        xla = f"XLA ({execution})" if execution else "XLA"
    if xla is None and backend != "torch":
        return trace
    return tuple(_placed_step(step, backend, xla) for step in trace)


def _placed_step(step: TraceStep, backend: str, xla: str | None) -> TraceStep:
    kernel = xla if xla is not None else torch_int8_kernel(step) if backend == "torch" else None
    children = tuple(_placed_step(c, backend, xla) for c in step.children)
    if kernel is None and all(a is b for a, b in zip(children, step.children, strict=True)):
        return step
    return step.model_copy(update={"kernel": kernel, "children": children})


def op_kernel(
    spec: ProbeSpec, shapes: tuple, converted: tuple[str, ...], device: str | None
) -> str | None:
    """The kernel path of an op probe's own op (not in its trace), from its converted input
    dtypes and shapes, as :func:`torch_int8_kernel` reads a step: torch only."""
    if spec.backend != "torch" or len(converted) < 2 or len(shapes) < 2:
        return None
    inputs = tuple(
        TraceTensor(dtype=d, shape=tuple(s)) for d, s in zip(converted, shapes, strict=False)
    )
    return torch_int8_kernel(TraceStep(index=0, op=spec.target, inputs=inputs, device=device))
