"""Front ends: the explorer widget (``widget``), ``%dtype_check`` (``magic``) and the
``dtype-explorer`` command (``cli``). Each asks the analyses and shows records through the
views; nothing below imports them. The command line's rich terminal (``_cli_terminal``) is
imported on first use, so a command that prints no table (a cached answer) never imports rich;
so is the stored answer's lane (``_cached_answer``), so that a printed answer kept for the
command line (``command``'s first lane) imports no NumPy, pydantic or record.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dtype_explorer import lazy

#: Name -> the module that holds it, imported on first use (``dtype_explorer.lazy``).
_EXPORTS: dict[str, str] = {
    "_cached_answer": "dtype_explorer.frontends._cached_answer",
    "_cli_terminal": "dtype_explorer.frontends._cli_terminal",
}

if TYPE_CHECKING:  # the real imports, for readers, IDEs and type checkers
    from dtype_explorer.frontends import _cached_answer, _cli_terminal

__getattr__, __dir__ = lazy.exports(__name__, _EXPORTS)

#: The public names: the table's.
__all__ = [name for name in _EXPORTS if not name.startswith("_")]
