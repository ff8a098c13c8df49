"""Front ends: the explorer widget (``widget``), ``%dtype_check`` (``magic``) and the
``dtype-explorer`` command (``cli``). Each asks the analyses and shows records through the
views; nothing below imports them."""
