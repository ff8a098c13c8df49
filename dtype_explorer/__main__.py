"""``python -m dtype_explorer``: the ``dtype-explorer`` command."""

from dtype_explorer.frontends.cli import app

if __name__ == "__main__":
    app(prog_name="dtype-explorer")
