"""Waiting for runs to end (design.md D6): which record each id names (``resolve``), the
reads and reaps of one wait (``watch``), what wakes a waiter early (``wake``,
``fswatch``), the projection of a row onto the one stable line (``outcome``), and the
CLI-free library call ``wait_for_terminal`` (``api``).

Imports point down only: wait uses record (to reap a dead owner's row), the store and
the base modules; the command `li wait` is ``lirun.cli.wait``.
"""
