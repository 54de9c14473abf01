"""The orchestration core flows and shows share: the dependency graph, the worker pool,
the owner's lease and heartbeat, and the checkpoint file."""
