"""Pure parts of event schedules: a poll's output into keyed events (schedules/events.py)
and the event in the action's templates (schedules/event_action.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lirun.errors import UsageError
from lirun.flows.templates import TemplateError
from lirun.schedules.actions import parse_action
from lirun.schedules.applyfile import load_apply_file
from lirun.schedules.event_action import check_templates, render_action
from lirun.schedules.events import (
    BAD_OUTPUT,
    MAX_EVENT_BYTES,
    Event,
    PollFailure,
    check_key_path,
    parse_poll_output,
)
from lirun.schedules.triggers import Trigger, next_due, parse_trigger


def test_a_json_array_and_json_lines_give_the_same_events() -> None:
    items = [{"number": 1, "title": "a"}, {"number": 2, "title": "b"}]
    array = parse_poll_output(json.dumps(items), "number")
    lines = parse_poll_output("\n".join(json.dumps(i) for i in items) + "\n\n", "number")
    assert array == lines == [Event("1", items[0]), Event("2", items[1])]
    assert parse_poll_output("", "id") == [] == parse_poll_output("[]", "id")


def test_a_dotted_key_reads_nested_fields_and_a_repeated_key_counts_once() -> None:
    items = [{"pull_request": {"number": 7}}, {"pull_request": {"number": 7}, "x": 1}]
    events = parse_poll_output(json.dumps(items), "pull_request.number")
    assert [e.key for e in events] == ["7"]
    assert parse_poll_output('{"id": true}', "id")[0].key == "true"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("not json", "line 1 is not JSON"),
        ("[1, 2", "output is not JSON"),
        ("[1]", "item 0 is int, not a JSON object"),
        ('{"id": 1}\n"x"', "item 1 is str"),
        ('[{"id": 1}, {"name": "b"}]', "item 1 has no text or number at key 'id'"),
        ('[{"id": {"nested": 1}}]', "item 0 has no text or number"),
        ('[{"id": ""}]', "item 0 has no text or number"),
    ],
)
def test_output_that_is_not_keyed_objects_is_a_poll_failure_naming_the_item(
    text: str, says: str
) -> None:
    with pytest.raises(PollFailure) as caught:
        parse_poll_output(text, "id")
    assert caught.value.reason == BAD_OUTPUT
    assert says in caught.value.detail


@pytest.mark.parametrize("path", ["", "a..b", ".a", "a.", "a b", "a[0]"])
def test_a_key_path_must_be_dotted_field_names(path: str) -> None:
    with pytest.raises(UsageError, match="not a field path"):
        check_key_path(path)


def test_an_event_too_large_is_stored_without_its_largest_value() -> None:
    big = Event("k", {"id": "k", "body": "x" * MAX_EVENT_BYTES})
    stored = json.loads(big.to_json())
    assert (stored["id"], stored["_truncated"]) == ("k", ["body"])
    assert stored["body"].startswith("[dropped: ")
    assert json.loads(Event("k", {"id": "k"}).to_json()) == {"id": "k"}


def test_a_poll_trigger_is_due_as_every_is_and_refuses_other_triggers() -> None:
    trigger = parse_trigger(poll="gh pr list", every="30s", key="number", now=100)
    assert (trigger.kind, trigger.seconds, trigger.key, trigger.timeout) == (
        "poll",
        30,
        "number",
        60,
    )
    assert next_due(trigger, 100) == 130
    assert next_due(trigger, 131) == 160
    assert Trigger.from_dict(trigger.to_dict()) == trigger
    assert "poll 'gh pr list' every 30s key number" in trigger.describe()
    assert parse_trigger(poll="x", now=0).seconds == 60  # default 1m
    with pytest.raises(UsageError, match="cannot take --cron"):
        parse_trigger(poll="x", cron="* * * * *", now=0)
    with pytest.raises(UsageError, match="--key belongs to a poll trigger"):
        parse_trigger(every="1m", key="id", now=0)
    with pytest.raises(UsageError, match="--backfill belongs"):
        parse_trigger(every="1m", backfill=True, now=0)


def test_templates_are_checked_by_whether_the_schedule_has_events(tmp_path: Path) -> None:
    good = parse_action(["agent", "claude", "Review {{ event.number }}"], base=str(tmp_path))
    check_templates(good, has_events=True)
    with pytest.raises(UsageError, match="only an event schedule"):
        check_templates(good, has_events=False)
    other = parse_action(["run", "echo", "{{ vars.x }}"], base=str(tmp_path))
    with pytest.raises(UsageError, match="argument 2 reads vars"):
        check_templates(other, has_events=True)
    check_templates(other, has_events=False)  # braces are text on a time schedule
    broken = parse_action(["run", "echo", "{{ event.x"], base=str(tmp_path))
    with pytest.raises(UsageError, match="argument 2"):
        check_templates(broken, has_events=True)


def test_the_event_is_rendered_into_prompt_arguments_and_cwd(tmp_path: Path) -> None:
    (tmp_path / "repo-7").mkdir()
    action = parse_action(
        ["run", "--cwd", "repo-{{ event.number }}", "echo", "pr={{ event.number }}"],
        base=str(tmp_path),
    )
    done = render_action(action, {"number": 7})
    assert done.cwd == str(tmp_path / "repo-7")
    assert done.task is not None
    assert done.task.run == ("echo", "pr=7")
    agent = parse_action(["agent", "claude", "{{ event.title }}!"], base=str(tmp_path))
    rendered = render_action(agent, {"title": "Fix"})
    assert rendered.task is not None
    assert rendered.task.prompt == "Fix!"
    with pytest.raises(TemplateError):
        render_action(agent, {"number": 1})  # no title: an error, never an empty string


def test_an_apply_file_defines_a_poll_schedule(tmp_path: Path) -> None:
    path = tmp_path / "schedules.yaml"
    path.write_text(
        "schedules:\n"
        "  - name: prs\n"
        "    poll: gh pr list --json number,title\n"
        "    every: 30s\n"
        "    key: number\n"
        "    backfill: true\n"
        "    poll_timeout: 20s\n"
        "    action: agent claude 'Review {{ event.number }}'\n"
    )
    (definition,) = load_apply_file(str(path), now=100).definitions
    trigger = definition.trigger
    assert (trigger.kind, trigger.command, trigger.seconds) == (
        "poll",
        "gh pr list --json number,title",
        30,
    )
    assert (trigger.key, trigger.backfill, trigger.timeout) == ("number", True, 20)


@pytest.mark.parametrize(
    ("lines", "line", "says"),
    [
        (["    poll: gh pr list", "    key: a..b"], 4, "not a field path"),
        (["    key: pull_request..number", "    poll: gh pr list"], 3, "not a field path"),
        (["    poll: gh pr list", "    every: 1m", "    key: ''"], 5, "not a field path"),
        (["    poll: gh pr list", "    key: [number]"], 4, "key: must be text"),
        (["    poll: gh pr list", "    key: true"], 4, "key: must be text"),
        (["    webhook: true", "    secret_env: S", "    key: 'a b'"], 5, "not a field path"),
        (["    poll: gh pr list", "    poll_timeout: [1]"], 4, "poll_timeout: must be text"),
        (["    poll: gh pr list", "    cron: '* * * * *'"], 3, "cannot take --cron"),
        (["    every: 1m", "    key: number"], 3, "--key belongs to a poll trigger"),
        (["    poll: gh pr list", "    backfill: maybe"], 4, "backfill: 'maybe'"),
        (["    poll: gh pr list", "    action: run echo '{{ vars.x }}'"], 4, "reads vars"),
        (["    every: 1m", "    action: run echo '{{ event.x }}'"], 4, "only an event schedule"),
    ],
)
def test_an_apply_file_names_the_line_of_a_bad_poll_entry(
    tmp_path: Path, lines: list[str], line: int, says: str
) -> None:
    body = ["schedules:", "  - name: prs", *lines]
    if not any("action:" in x for x in lines):
        body.append("    action: run echo '{{ event.number }}'")
    path = tmp_path / "schedules.yaml"
    path.write_text("\n".join(body) + "\n")
    with pytest.raises(UsageError) as caught:
        load_apply_file(str(path), now=100)
    assert f"schedules.yaml:{line}:" in str(caught.value)
    assert says in str(caught.value)
