"""A schedule run as its worker handles it: its schedule (if any), its action (an
event's rendered for that event) and its policies, read once when it was handled."""

from __future__ import annotations

from lirun.flows.templates import TemplateError
from lirun.schedules.actions import Action
from lirun.schedules.definition import Policies
from lirun.schedules.event_action import decode_event, render_action
from lirun.store import Store
from lirun.store.rows import ScheduleRunRow


class RunContext:
    """A run's schedule (if any), action and policies, as read when it was handled."""

    def __init__(self, store: Store, run: ScheduleRunRow) -> None:
        self.run = run
        schedule = store.schedules.get_by_id(run.schedule_id) if run.schedule_id else None
        self.schedule = schedule
        source = run.action_json or (schedule.action_json if schedule else None)
        self.action = Action.from_dict(source) if isinstance(source, dict) else None
        self.render_error: str | None = None  # the event did not fit its templates
        event = decode_event(run.event_json)
        if self.action is not None and event is not None:
            try:
                self.action = render_action(self.action, event)
            except TemplateError as exc:
                self.render_error = f"event {run.event_key}: {exc}"
        # An ad-hoc run (li submit) keeps its own run policies with its action.
        own = source.get("policies") if schedule is None and isinstance(source, dict) else None
        stored = schedule.policies_json if schedule else None
        self.policies = Policies.from_dict(stored or own or {})
        self.name = schedule.name if schedule else None

    def label(self) -> str:
        what = self.action.describe() if self.action else "(no action)"
        return f"schedule {self.name}" if self.name else f"submit {what}"
