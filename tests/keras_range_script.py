"""The smoke set run on the lowest Keras release the package supports, in one process whose
``PYTHONPATH`` puts that release first (tests/test_keras_range.py): the kernel's own Keras is
that release, and so is every worker's. Each question is asked of the tool and of bare Keras
beside it; the facts are printed as one JSON object on the last line. Not collected by pytest
(``*_script.py``)."""

from __future__ import annotations

import json
import sys
import traceback

import numpy as np

facts: dict = {}


def fact(name):
    """Record what ``fn`` returns under ``name``, or the exception it raised (with where)."""

    def record(fn):
        try:
            facts[name] = fn()
        except Exception as error:
            facts[name] = {"raised": f"{type(error).__name__}: {error}"[:2000]}
            traceback.print_exc()
        return fn

    return record


import keras  # noqa: E402

import dtype_explorer as dx  # noqa: E402
from dtype_explorer import keras_release  # noqa: E402

facts["keras"] = keras.__version__
facts["found"] = keras_release.installed()[0]
facts["kernel_backend"] = keras.backend.backend()
X = np.arange(6, dtype="uint8").reshape(2, 3)


def _error(r):
    return None if r.error is None else {"where": r.error.where, "message": r.error.message}


@fact("in_process")
def _():
    r = dx.probe("Dense", "uint8", backend=None, kwargs={"units": 2}, values=[X], use_cache=False)
    raw = keras.layers.Dense(2)(X)
    return {
        "status": r.status,
        "keras": r.versions["keras"],
        "output": r.output_dtype,
        "raw": keras.backend.standardize_dtype(raw.dtype),
        "error": _error(r),
    }


@fact("every_backend")
def _():
    rs = dx.probe("Dense", "uint8", backend="all", kwargs={"units": 2}, use_cache=False)
    return {
        r.backend: {"status": r.status, "keras": r.versions["keras"], "error": _error(r)}
        for r in rs
    }


@fact("lacking")
def _():
    """A mode 3.1 lacks: Keras's own refusal, beside bare Keras's."""
    r = dx.probe("Dense", "float32", backend=None, kwargs={"units": 2}, quantize="float8")
    layer = keras.layers.Dense(2)
    layer.build((None, 3))
    try:
        layer.quantize("float8")
        raw = None
    except Exception as error:
        raw = str(error)
    return {"status": r.status, "error": _error(r), "raw": raw}


def _model():
    inputs = keras.Input((3,), name="x")
    hidden = keras.layers.Dense(4, name="hidden")(inputs)
    return keras.Model(inputs, keras.layers.Dense(2, name="out")(hidden), name="small")


@fact("check_model")
def _():
    model = _model()
    sample = np.ones((2, 3), "float32")
    report = dx.check_model(model, sample)
    root = next(c for c in report.layers if c.path == report.model)
    return {
        "model": report.model,
        "keras": report.keras,
        "output": [t.dtype for t in root.outputs],
        "raw": keras.backend.standardize_dtype(model(sample).dtype),
        "findings": [f.kind for f in report.findings],
    }


@fact("magic")
def _():
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "dtype_explorer")
    shell.user_ns["model"] = _model()
    report = shell.run_line_magic("dtype_check", "model --policy mixed_float16")
    return {"type": type(report).__name__, "policy": report.policy_override}


@fact("widget")
def _():
    import comm

    sys.path.insert(0, sys.argv[1])  # tests/: the page's side of the comm
    from page_comm import PageComm, request

    comm.create_comm = PageComm
    widget = dx.DtypeExplorer(backends=["numpy"], use_cache=False)
    widget.wait(240)
    widget.comm.page_sends(request=request(widget, target="Dense", input_dtypes=["float16"]))
    answer = widget.wait(240)["numpy"]
    return {
        "status": answer.status,
        "keras": answer.versions["keras"],
        "output": answer.output_dtype,
        "page_error": widget.error,
        "published": widget.comm.last_sent("results")["numpy"]["status"],
    }


dx.shutdown()
print(json.dumps(facts))
