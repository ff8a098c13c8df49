"""The supported Keras range (``dtype_explorer.keras_release``): one owner, the same in
``pyproject.toml``, and the Keras this Python would import read without importing it, from the
``dist-info`` folder pip writes beside the package (the real releases: tests/test_keras_range.py).
"""

from __future__ import annotations

import importlib.util
import sys
from importlib import metadata
from pathlib import Path

import pytest
import tomllib

from dtype_explorer import keras_release
from dtype_explorer.analyses import _bisect

ROOT = Path(__file__).resolve().parents[1]


def _site(tmp_path: Path, dist_info: str | None) -> Path:
    """A folder laid out as ``pip install --target`` lays one out."""
    (tmp_path / "keras").mkdir()
    (tmp_path / "keras" / "__init__.py").write_text("raise SystemExit('imported')\n")
    if dist_info is not None:
        (tmp_path / dist_info).mkdir()
    return tmp_path


def test_pyproject_requires_the_range_the_package_checks():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    keras = [d for d in project["project"]["dependencies"] if d.startswith("keras")]
    assert keras == [keras_release.REQUIREMENT] == ["keras>=3.1.0,<4"]


def test_engines_reach_as_low_as_the_kernel():
    assert str(_bisect.OLDEST) == keras_release.LOWEST


def test_the_development_keras_is_in_the_range():
    assert keras_release.supported(metadata.version("keras"))
    found = keras_release.installed()
    assert found is not None and found[0] == metadata.version("keras")
    assert Path(found[1]) == Path(importlib.util.find_spec("keras").origin).parent


@pytest.mark.parametrize(
    ("version", "ok"),
    [("3.0.5", False), ("3.0.0", False), ("3.1.0", True), ("3.10.0", True), ("3.16.0.dev1", True)],
)
def test_supported_compares_release_numbers_not_text(version, ok):
    assert keras_release.supported(version) is ok  # "3.10.0" > "3.1.0", "3.0.5" < "3.1.0"


def test_an_older_keras_is_refused_naming_the_range_the_release_and_the_fix(tmp_path):
    site = _site(tmp_path, "keras-3.0.5.dist-info")
    assert keras_release.installed([str(site)]) == ("3.0.5", str(site / "keras"))
    with pytest.raises(keras_release.KerasReleaseError) as refused:
        keras_release.check([str(site)])
    said = str(refused.value)
    assert "Keras 3.0.5" in said and str(site / "keras") in said
    assert 'pip install -U "keras>=3.1.0,<4"' in said
    assert isinstance(refused.value, ImportError)
    assert "keras" not in sys.modules or sys.modules["keras"].__file__ != str(site / "keras")


@pytest.mark.parametrize(
    "dist_info",
    ["keras-3.1.0.dist-info", "keras_nightly-3.16.0.dev2026102704.dist-info", None],
)
def test_a_supported_or_unknown_keras_passes(tmp_path, dist_info):
    """A supported release, Keras's main (``keras-nightly``), or a Keras with no dist-info
    beside it (a source checkout: nothing says its version) is let be."""
    keras_release.check([str(_site(tmp_path, dist_info))])


def test_no_keras_at_all_is_left_to_the_import_that_needs_it(tmp_path):
    assert keras_release.installed([str(tmp_path)]) is None
    keras_release.check([str(tmp_path)])
