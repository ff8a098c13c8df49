"""The typer app as the click command mkdocs-click documents (``docs/reference/cli.md``)."""

import typer

from dtype_explorer.frontends.cli import app

command = typer.main.get_command(app)
