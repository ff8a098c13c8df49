"""The audit's rule modules are pure functions of records: they import no Keras, and using
them imports no framework (read in a fresh Python, ``sys.modules`` after a rule ran). Apart
from ``test_audit_rules.py`` because it starts a process: the rules' own tests stay in the
fast tier."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RULE_MODULES = ("_rules", "_rules_across", "_rules_exact", "_rules_output", "_fix_choice")


def test_the_rule_modules_import_no_keras():
    for name in RULE_MODULES:
        tree = ast.parse(
            (ROOT / "dtype_explorer" / "analyses" / "audit" / f"{name}.py").read_text()
        )
        imported = [
            alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.Import)
            for alias in node.names
        ] + [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
        assert not [m for m in imported if m.split(".")[0] == "keras"], (name, imported)
    code = (
        "import sys, json\n"
        "from dtype_explorer.analyses.audit import _rules as r, _rules_across as a\n"
        "from dtype_explorer.records import LayerCall, TensorInfo, PredictReport\n"
        "c = LayerCall(path='m/d', layer_class='Dense', depth=1, policy='float32',\n"
        "    compute_dtype='float32', variable_dtype='float32',\n"
        "    given=(TensorInfo(dtype='float64'),),\n"
        "    received=(TensorInfo(dtype='float32'),), outputs=(TensorInfo(dtype='float32'),))\n"
        "kinds = [f.kind for f in r.find([c], model=r.AuditedModel(name='m', policy='float32'),\n"
        "    policy='float32')]\n"
        "list(a.mode_divergences(PredictReport(compiled=False, execution='x')))\n"
        "print(json.dumps([kinds, sorted(m for m in sys.modules if m.split('.')[0] in\n"
        "    ('keras', 'tensorflow', 'jax', 'torch'))]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    kinds, frameworks = json.loads(done.stdout.strip().splitlines()[-1])
    assert kinds == ["silent-downcast"] and frameworks == []
