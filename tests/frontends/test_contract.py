"""The widget contract is one file: the traits the Python class declares, the request keys the
kernel accepts and the page's JSDoc typedefs are all read or generated from it. No widget, no
worker: fast."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import traitlets

from dtype_explorer.frontends import _contract, widget
from dtype_explorer.frontends._contract import ContractTraits

ROOT = Path(__file__).resolve().parents[2]
CONTRACT = json.loads((ROOT / "dtype_explorer/frontends/widget_contract.json").read_text())


def _generator():
    spec = importlib.util.spec_from_file_location(
        "contract_typedefs", ROOT / "tools/contract_typedefs.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_declared_traits_are_the_contract_s():
    declared = ContractTraits.class_traits(sync=True)
    assert set(declared) == set(CONTRACT["traits"])
    for name, spec in CONTRACT["traits"].items():
        trait = declared[name]
        assert type(trait) is _contract.TRAIT_TYPES[spec["type"]], name
        assert trait.metadata == {"sync": True, "writer": spec["writer"], "doc": spec["doc"]}
    # the widget synces exactly these (its other synced traits are ipywidgets' own)
    synced = {
        n for n, t in widget.DtypeExplorer.class_traits(sync=True).items() if "writer" in t.metadata
    }
    assert synced == set(CONTRACT["traits"])


def test_a_trait_of_another_type_than_the_contract_s_is_refused():
    try:
        _contract._synced("request", traitlets.List())
    except TypeError as error:
        assert "'request' is object in the contract" in str(error)
    else:
        raise AssertionError("a List for an object trait was accepted")


def test_the_request_keys_are_the_contract_s():
    assert widget.REQUEST_KEYS == _contract.REQUEST_KEYS == tuple(CONTRACT["request"])
    assert "nonce" in _contract.REQUEST_KEYS and "target" in _contract.REQUEST_KEYS


def test_the_page_s_typedefs_are_generated_from_the_contract_and_up_to_date():
    generator = _generator()
    written = (ROOT / "js/src/contract-types.js").read_text()
    assert written == generator.typedefs(CONTRACT), "run: python tools/contract_typedefs.py"
    assert "@property {string | null} engine" in written
    assert "@property {WidgetRequest} request" in written
    # every module that reads the typedefs is type-checked by IDEs
    users = [p for p in (ROOT / "js/src").glob("*.js") if "contract-types.js" in p.read_text()]
    assert {p.name for p in users} >= {"app.js", "controls.js", "contract.js", "index.js"}
    for path in users:
        assert path.read_text().startswith("// @ts-check\n"), path.name
