"""Light and dark: the palette's ``themes`` laid out for the cards (CSS variables) and for the
plotly figures (a template per theme).

A card draws each role of the page (``bg``, ``fg``, ``fg2``, ``error``, ...) as the CSS variable
``--dx-<role>``: the host's own variable where the palette's ``theme_hosts`` names one
(JupyterLab's ``--jp-*``, VS Code's ``--vscode-*``), else the theme's colour. The dark colours
apply where the page says it is dark (``theme_signals``: JupyterLab Dark, VS Code, marimo,
Colab), or says nothing and the reader's system prefers dark. The widget does the same in the
page (``js/src/theme.js``).

>>> role_value("light", "bg")
'var(--jp-layout-color1, var(--vscode-editor-background, #ffffff))'
>>> role_value("dark", "accent") == PALETTE["themes"]["dark"]["accent"]  # no host variable
True
>>> template("dark")["layout"]["font"]["color"] == PALETTE["themes"]["dark"]["fg"]
True
"""

from __future__ import annotations

from typing import Any

from dtype_explorer.errors import unknown
from dtype_explorer.views._palette import PALETTE

#: The themes the palette has a colour set for.
THEMES: tuple[str, ...] = tuple(PALETTE["themes"])


def role_value(theme: str, role: str) -> str:
    """The CSS value of a role under ``theme``: its host variables, then the theme's colour."""
    value = PALETTE["themes"][_checked(theme)][role]
    for name in reversed(PALETTE["theme_hosts"].get(role, ())):
        value = f"var({name}, {value})"
    return value


def _declarations(theme: str) -> str:
    return "".join(f"--dx-{role}: {role_value(theme, role)}; " for role in PALETTE["themes"][theme])


def theme_css(scope: str = ".dx-card") -> str:
    """The CSS that gives ``scope`` its ``--dx-*`` role variables, light by default, dark where
    the page says so or says nothing and the system prefers dark; every selector starts with
    ``scope`` (a card's styles reach nothing outside it).

    >>> css = theme_css()
    >>> css.startswith(".dx-card { color-scheme: light; --dx-bg: ")
    True
    >>> "body.dark *, " in css and "@media (prefers-color-scheme: dark)" in css
    True
    """
    signals = PALETTE["theme_signals"]
    dark, light = (", ".join(f"{s} *" for s in signals[name]) for name in ("dark", "light"))
    dark_block = f"color-scheme: dark; {_declarations('dark')}"
    return (
        f"{scope} {{ color-scheme: light; {_declarations('light')}}}\n"
        f"@media (prefers-color-scheme: dark) {{ {scope}:not(:is({light})) {{ {dark_block}}} }}\n"
        f"{scope}:is({dark}) {{ {dark_block}}}\n"
    )


def template(theme: str) -> dict[str, Any]:
    """A plotly template (as a dict) drawing a figure's text, grid and hover labels in
    ``theme``'s colours on its own background, so the figure reads the same on any page.

    Args:
        theme: ``"light"`` or ``"dark"``.

    Returns:
        ``{"layout": {...}}``, for ``figure.update_layout(template=...)``.

    >>> template("light")["layout"]["paper_bgcolor"]
    '#ffffff'
    """
    colours = PALETTE["themes"][_checked(theme)]
    axis = {
        "gridcolor": colours["border"],
        "linecolor": colours["border-strong"],
        "zerolinecolor": colours["border-strong"],
        "tickfont": {"color": colours["fg"]},
        "title": {"font": {"color": colours["fg"]}},
    }
    return {
        "layout": {
            "paper_bgcolor": colours["bg"],
            "plot_bgcolor": colours["bg"],
            "font": {"color": colours["fg"]},
            "title": {"font": {"color": colours["fg0"]}},
            "xaxis": axis,
            "yaxis": axis,
            "hoverlabel": {
                "bgcolor": colours["bg2"],
                "bordercolor": colours["border-strong"],
                "font": {"color": colours["fg"]},
            },
            "modebar": {
                "bgcolor": colours["bg"],
                "color": colours["fg2"],
                "activecolor": colours["fg0"],
            },
            "updatemenudefaults": {
                "bgcolor": colours["bg2"],
                "bordercolor": colours["border-strong"],
                "font": {"color": colours["fg"]},
            },
        }
    }


def chosen_theme(theme: str | None) -> str:
    """``theme`` checked; ``None`` is plotly's choice: ``"dark"`` where plotly's default template
    is a dark one (``plotly.io.templates.default = "plotly_dark"``), else ``"light"``.

    >>> chosen_theme("dark")
    'dark'
    """
    if theme is not None:
        return _checked(theme)
    import plotly.io as pio

    return "dark" if "dark" in str(pio.templates.default) else "light"


def _checked(theme: str) -> str:
    if theme not in PALETTE["themes"]:
        raise unknown("theme", theme, THEMES)
    return theme
