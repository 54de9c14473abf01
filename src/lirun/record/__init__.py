"""The outcome record of one execution: its run directory, the evidence and artifacts
checked at its end, the decision of how it ended (status, reason), the setup and
teardown that persist it, the spool for an outcome the database refused, and the
liveness checks and reap of a run whose owner died.

Imports point down only: record uses the store and the base modules, never wait,
exec or cli.
"""
