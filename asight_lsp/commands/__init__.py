"""One module per ``asight`` sub-command (``add_parser`` + ``run``)."""
