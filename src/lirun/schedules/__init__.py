"""Schedules: definitions (trigger, action, policies) stored as an entity of their own,
and the pure due-time computation the workers fire by. See docs/schedules.md."""
