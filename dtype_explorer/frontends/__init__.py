"""Front ends: the explorer widget (``widget``), ``%dtype_check`` (``magic``) and the
``dtype-explorer`` command (``cli``). Each asks the analyses and shows records through the
views; nothing below imports them. The command line's rich terminal (``_cli_terminal``) is
imported on first use, so a command that prints no table (a cached answer) never imports rich.
"""

from dtype_explorer import lazy

__getattr__, __dir__ = lazy.exports(
    __name__, {"_cli_terminal": "dtype_explorer.frontends._cli_terminal"}
)
