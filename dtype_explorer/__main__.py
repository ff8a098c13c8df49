"""``python -m dtype_explorer``: the ``dtype-explorer`` command."""

from dtype_explorer.frontends.command import main

if __name__ == "__main__":
    main()
