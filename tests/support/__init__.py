"""Helpers the tests share (not fixtures: those stay in ``tests/conftest.py``).

Import them as ``from support.storekit import ...``; pytest puts ``tests/`` on
``sys.path`` (rootdir conftest, prepend import mode), and a subprocess that needs them
gets ``PYTHONPATH=support.TESTS_DIR``.
"""

from __future__ import annotations

from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parent.parent
