"""How records reach their views: one dispatch per kind of rendering.

Records never import a view. The views package names the view of each record type
(``dtype_explorer.views.VIEWS``: kind -> record class name -> view), and a record's
``__str__``, ``_repr_html_`` and ``figure()`` call :func:`text`, :func:`html` and
:func:`figure`. On the first rendering of a type, the dispatch reads that table, imports the
one view it names and registers it (``text.register(ProbeResult, view)`` does the same by
hand): the one late binding of the package, which keeps the arrow pointing from views to
records, as pandas' formatters point at the frame.

>>> from dtype_explorer.records import ProbeResult, ProbeSpec
>>> r = ProbeResult(spec=ProbeSpec(target="Dense"), status="ok", backend="numpy",
...                 output_dtype="float32", verdict="as-documented")
>>> text(r).splitlines()[0]
'Dense on numpy (cpu), policy float32: ok, as-documented'
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

#: The package whose import registers every view.
VIEWS = "dtype_explorer.views"


def _dispatcher(kind: str, missing: Callable[[Any], Any] | None = None) -> Callable[..., Any]:
    """A dispatch on the record's type; ``missing(record)`` answers for a type no view draws
    (else ``TypeError``)."""

    @functools.singledispatch
    def render(record: Any, **options: Any) -> Any:
        views = importlib.import_module(VIEWS)
        for cls in type(record).__mro__:  # the named view of the record's type, or a base's
            name = views.VIEWS[kind].get(cls.__name__)
            if name is not None:
                view = getattr(views, name)  # imports that view's module only
                render.register(cls, view)
                return view(record, **options)
        if missing is not None:
            return missing(record)
        raise TypeError(f"no {kind} view is registered for {type(record).__name__}")

    render.__name__ = render.__qualname__ = kind
    render.__doc__ = f"The {kind} view of a record (registered by ``dtype_explorer.views``)."
    return render


#: Plain text, for terminals, logs and ``print`` (pydantic's ``field=value`` text otherwise).
text = _dispatcher("text", missing=BaseModel.__str__)
#: A self-contained HTML fragment, for notebooks (``None``, i.e. the text repr, otherwise).
html = _dispatcher("html", missing=lambda record: None)
#: A plotly figure.
figure = _dispatcher("figure")
#: A standalone HTML page (``Survey.save("x.html")``).
page = _dispatcher("page")

__all__ = ["figure", "html", "page", "text"]
