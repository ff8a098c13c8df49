"""A griffe extension for the API reference: the names a package exports lazily
(``dtype_explorer.lazy``, PEP 562) become aliases griffe can resolve.

griffe reads the code without running it, so it does not see a name that a package's
``__getattr__`` imports on first use: ``dtype_explorer.probe`` points at
``dtype_explorer.analyses.probe``, which only ``analyses._EXPORTS`` names. The package's
``_EXPORTS`` table stays the one owner of where each name lives; this extension reads it as
``lazy.exports`` does (``module``, ``module:attribute``, or a module exported as itself) and
adds an alias for every name the module does not define or import itself.
"""

from __future__ import annotations

import ast
from typing import Any

import griffe


def lazy_targets(tree: ast.Module) -> dict[str, str]:
    """Each name of the module's ``_EXPORTS`` literal and the dotted path it points at.

    >>> lazy_targets(ast.parse('_EXPORTS: dict[str, str] = {"a": "p._m", "b": "p.b", "c": "p:d"}'))
    {'a': 'p._m.a', 'b': 'p.b', 'c': 'p.d'}
    """
    for statement in tree.body:
        target = getattr(statement, "target", None) or next(
            iter(getattr(statement, "targets", [])), None
        )
        if isinstance(target, ast.Name) and target.id == "_EXPORTS" and statement.value is not None:
            names = ast.literal_eval(statement.value)
            break
    else:
        return {}
    paths: dict[str, str] = {}
    for name, where in names.items():
        module, _, attribute = where.partition(":")
        if attribute:
            paths[name] = f"{module}.{attribute}"
        elif module.rsplit(".", 1)[-1] == name:
            paths[name] = module  # a submodule, exported as itself
        else:
            paths[name] = f"{module}.{name}"
    return paths


class LazyExports(griffe.Extension):
    def on_module_members(
        self, *, node: ast.AST | griffe.ObjectNode, mod: griffe.Module, **kwargs: Any
    ) -> None:
        if not isinstance(node, ast.Module):
            return  # inspected, not visited: the members are the real ones
        for name, path in lazy_targets(node).items():
            if name not in mod.members:
                mod.set_member(name, griffe.Alias(name, path, parent=mod))
