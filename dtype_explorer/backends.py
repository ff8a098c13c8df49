"""The backends Keras 3 runs on, and how a list of them is named and checked (once, here).

>>> names(["jax", "numpy", "jax"])
['jax', 'numpy']
>>> names("all")
['jax', 'tensorflow', 'torch', 'numpy']
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

BACKENDS: tuple[str, ...] = ("jax", "tensorflow", "torch", "numpy")
ALL = "all"
#: The one library-name map: each backend's array library (its NumPy API: ``jax.numpy``,
#: ``tf.experimental.numpy``, ``torch``, ``numpy``) -> its usual alias, as tables name it
#: (``np.add``, ``jnp.add``; an expectation from ``torch`` is ``torch``). These libraries are
#: the references a promotion table and a probe's expectations compare Keras with, in the
#: order a promotion table lists them.
LIBRARIES: dict[str, str] = {"jax": "jnp", "numpy": "np", "torch": "torch", "tensorflow": "tnp"}


def names(backends: str | Iterable[str]) -> list[str]:
    """``backends`` as a list of distinct backend names, in the order given: one name, names
    separated by commas (``"jax,torch"``, as the CLI and ``%dtype_check`` take them), a list of
    names, or ``"all"`` (every backend). Raises ``InvalidSpecError`` for an unknown name, a
    non-string or an empty list.

    >>> names("jax, torch")
    ['jax', 'torch']
    """
    if isinstance(backends, str):
        parts = [part.strip() for part in backends.split(",") if part.strip()]
        listed: list[object] = list(BACKENDS) if parts == [ALL] else list(parts)
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
