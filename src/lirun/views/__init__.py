"""Read views built from several records: documents the CLI, the client and the
dashboard show alike (``detail``: one record, ``li status ID --json``)."""
