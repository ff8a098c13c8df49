"""``ml_dtypes`` is imported only where a bfloat16/float8 array is really built or measured
(issue 44: it was ~60 % of a cached CLI answer), and the facts ``dtypes`` reads from NumPy
instead are the ones ``ml_dtypes`` gives, compared with the library run beside it."""

import json
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

from dtype_explorer import dtypes
from tests.front_process import ROOT

#: In a fresh process: the package and every dtype fact of NumPy's own types, then one
#: bfloat16 sample; which of them had imported ml_dtypes.
SCRIPT = """
import json, sys
import dtype_explorer
from dtype_explorer import dtypes
seen = {"import": "ml_dtypes" in sys.modules}
for name in ("float16", "float32", "float64", "int8", "uint16", "complex64", "bool"):
    dtypes.bits(name), dtypes.tolerance(name), dtypes.int_range(name)
    dtypes.narrows(name, "float16")
    if dtypes.family(name) == "float":
        dtypes.float_limits(name)
    dtypes.exact_integers(name), dtypes.numpy_dtype(name), dtypes.sample(name, (2,), preset="edge")
    dtypes.standardize(name), dtypes.family(name)
seen["numpy types"] = "ml_dtypes" in sys.modules
seen["bfloat16 dtype"] = str(dtypes.sample("bfloat16", (3,)).dtype)
seen["bfloat16"] = "ml_dtypes" in sys.modules
print(json.dumps(seen))
"""


def test_ml_dtypes_is_imported_only_when_a_bfloat16_array_is_built():
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, cwd=ROOT, check=True
    )
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {
        "import": False,
        "numpy types": False,
        "bfloat16 dtype": "bfloat16",
        "bfloat16": True,
    }


@pytest.mark.parametrize("name", ["float16", "float32", "float64", *dtypes.ML_DTYPES])
def test_float_facts_are_the_ones_ml_dtypes_gives(name):
    raw = ml_dtypes.finfo(getattr(ml_dtypes, name, None) or np.dtype(name))
    assert dtypes.bits(name) == raw.bits
    assert dtypes.tolerance(name) == dtypes.TOLERANCE_ULPS * float(raw.eps)
    assert dtypes.numpy_dtype(name) == np.dtype(getattr(ml_dtypes, name, None) or name)
    if dtypes.family(name) == "float":
        assert dtypes.exact_integers(name) == 2 ** (int(raw.nmant) + 1)
        assert dtypes.float_limits(name) == (float(raw.max), float(raw.smallest_normal))
    edge = dtypes.sample(name, (4,), preset="edge").astype(np.float64)
    assert edge[2:].tolist() == [float(raw.max), float(raw.min)]


@pytest.mark.parametrize("name", [*dtypes.FAMILIES["int"], *dtypes.FAMILIES["uint"]])
def test_integer_facts_are_the_ones_ml_dtypes_gives(name):
    raw = ml_dtypes.iinfo(np.dtype(name))
    assert dtypes.bits(name) == raw.bits
    assert dtypes.int_range(name) == (int(raw.min), int(raw.max))


def test_an_unknown_ml_dtypes_name_is_refused_with_the_valid_ones():
    with pytest.raises(dtypes.InvalidSpecError, match="float8_e5m2"):
        dtypes.ml_type("bfloat61")
