"""The backends the general tests sweep (the one owner): :data:`SWEPT`, the four with an array
library of their own (``backends.LIBRARIES``: jax, tensorflow, torch, numpy).

Keras 3 has a fifth backend, openvino (inference only), and ``backend="all"`` answers it too
where it is installed. The general tests do not sweep it: a fifth parameter on each of some
seventy backend sweeps would cost the CI minutes its 18-minute budget has not got, and what
differs on openvino (what Keras does not implement there, drawn as not supported; its op set
as the reference, as it has no array library) is not what those tests check. openvino has
tests of its own (``tests/keras_run/test_openvino.py``: dtypes beside raw
``KERAS_BACKEND=openvino`` scripts, ``mode="fit"``, an op it does not implement,
``backend="all"``). A test whose subject is every installed backend (``"all"``,
``pool.installed_backends()``) takes them all, openvino included.
"""

from __future__ import annotations

from dtype_explorer.backends import BACKENDS, LIBRARIES

#: The backends the general tests sweep, in ``BACKENDS``' order.
SWEPT: tuple[str, ...] = tuple(b for b in BACKENDS if b in LIBRARIES)
