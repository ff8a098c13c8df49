"""The backends Keras 3 runs on, and how a list of them is named and checked (once, here).

>>> names(["jax", "numpy", "jax"])
['jax', 'numpy']
>>> names("all")
['jax', 'tensorflow', 'torch', 'numpy', 'openvino']
>>> LIBRARIES["tensorflow"]
'tnp'
>>> names(["jaxx"])
Traceback (most recent call last):
...
dtype_explorer.errors.InvalidSpecError: unknown backend 'jaxx'; did you mean 'jax'? ...
"""

from __future__ import annotations

from collections.abc import Iterable

from dtype_explorer.errors import InvalidSpecError, unknown

#: Every backend Keras 3 runs on (``keras/src/backend/<name>``), in the order tables list them.
#: ``openvino`` runs inference only: Keras's own trainer refuses ``fit``, and the ops it does
#: not implement raise ``NotImplementedError`` (both shown as "not supported here").
BACKENDS: tuple[str, ...] = ("jax", "tensorflow", "torch", "numpy", "openvino")
ALL = "all"
#: The one library-name map: each backend's array library (its NumPy API: ``jax.numpy``,
#: ``tf.experimental.numpy``, ``torch``, ``numpy``) -> its usual alias, as tables name it
#: (``np.add``, ``jnp.add``; an expectation from ``torch`` is ``torch``). These libraries are
#: the references a promotion table and a probe's expectations compare Keras with, in the
#: order a promotion table lists them. OpenVINO has none: its Python API builds graphs of its
#: op set (``openvino.opset16``), not arrays, so its probes are set beside that op set where it
#: has the op (``keras_run/references/_openvino.py``), never in a promotion table's columns.
LIBRARIES: dict[str, str] = {"jax": "jnp", "numpy": "np", "torch": "torch", "tensorflow": "tnp"}


def _parts(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def is_all(backends: object) -> bool:
    """Whether ``backends`` is the text ``"all"`` (spaces around it allowed, as the CLI takes it).

    >>> is_all("all "), is_all(["all"]), is_all("jax,all")
    (True, True, False)
    """
    if isinstance(backends, str):
        return _parts(backends) == [ALL]
    return isinstance(backends, (list, tuple)) and list(backends) == [ALL]


def is_one(backends: object) -> bool:
    """Whether ``backends`` is the text of one backend's name (answered by one result, not a
    set): ``"jax"`` or ``" jax "``, not ``"jax,numpy"`` nor ``"all"``.

    >>> is_one("jax"), is_one("jax,numpy"), is_one("all"), is_one(["jax"])
    (True, False, False, False)
    """
    return isinstance(backends, str) and len(_parts(backends)) == 1 and not is_all(backends)


def names(backends: str | Iterable[str]) -> list[str]:
    """``backends`` as a list of distinct backend names, in the order given: one name, names
    separated by commas (``"jax,torch"``, as the CLI and ``%dtype_check`` take them), a list of
    names, or ``"all"`` (every backend). Raises ``InvalidSpecError`` for an unknown name, a
    non-string or an empty list.

    >>> names("jax, torch")
    ['jax', 'torch']
    """
    if is_all(backends):
        listed: list[object] = list(BACKENDS)
    elif isinstance(backends, str):
        listed = list(_parts(backends))
    else:
        try:
            listed = list(backends)
        except TypeError:
            raise InvalidSpecError(
                f"backend must be a name, a list of names or 'all'; "
                f"received: {type(backends).__name__}"
            ) from None
    if not listed:
        raise InvalidSpecError(
            f"at least one backend is needed; valid: {', '.join(BACKENDS)} or 'all'"
        )
    for name in listed:
        if not isinstance(name, str) or name not in BACKENDS:
            raise unknown("backend", name, (*BACKENDS, ALL))
    return list(dict.fromkeys(listed))  # type: ignore[arg-type]
