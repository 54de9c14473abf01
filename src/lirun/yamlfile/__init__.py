"""YAML files read whole with their line numbers (``lines``), their shape bounded before
they become values (``shape``), and every problem in them collected as ``file:line``
(``problems``). Flow, show, schedule and profile files all read through here."""
