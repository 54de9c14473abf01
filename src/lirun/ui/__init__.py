"""``li ui``: the web dashboard (the optional extra ``ui``: Starlette and uvicorn).

It reads the record and never writes it (design.md §4.11): pages and a JSON API over the
same Store every ``li`` command uses, and one watcher per server that pushes the
history's new rows to every browser over Server-Sent Events. ``create_app`` builds the
application (``ui.app``); nothing here is imported by the library.
"""
