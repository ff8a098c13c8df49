"""Lazy package attributes (PEP 562): a package's public names, each imported from the module
that holds it on first use, so importing the package imports none of its modules.

A front end that needs one thing (the CLI's cached answer: the spec check, the cache read and
the text view) then imports only the modules that thing lives in. The package's modules still
import each other at module level, so the import graph the tools read stays the real one.

>>> import sys
>>> getattr_, dir_ = exports("json", {"dumps": "json", "decoder": "json.decoder"})
>>> getattr_("dumps")({"a": 1}), "json.decoder" in sys.modules
('{"a": 1}', True)
>>> getattr_("loads")
Traceback (most recent call last):
...
AttributeError: module 'json' has no attribute 'loads'
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def exports(
    package: str, names: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__`` for ``names`` (public name -> the module
    that holds it, or ``module:attribute`` for a name exported under another; a name that is
    the module's own last part is the module itself).

    Args:
        package: the package's ``__name__``.
        names: each public name and the module it is imported from.

    Returns:
        ``(__getattr__, __dir__)``, to assign at the package's module level. A name is looked
        up once: its value is then kept in the package's globals.

    >>> getattr_, _ = exports("os", {"path": "os.path"})
    >>> getattr_("path").__name__ in ("posixpath", "ntpath")
    True
    """

    def __getattr__(name: str) -> Any:
        module_name = names.get(name)
        if module_name is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module_name, _, attribute = module_name.partition(":")
        module = importlib.import_module(module_name)
        if attribute or module_name.rsplit(".", 1)[-1] != name:
            value = getattr(module, attribute or name)
        else:
            value = module  # a submodule, exported as itself
        vars(sys.modules[package])[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *names})

    return __getattr__, __dir__
