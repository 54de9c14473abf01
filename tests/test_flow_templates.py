"""Leg templates: rendered in a sandbox, strict about missing names, read before start."""

from __future__ import annotations

import pytest

from lirun.flows.templates import TemplateError, referenced_legs, references, render

CONTEXT = {
    "vars": {"target": "src", "n": "3"},
    "legs": {
        "plan": {"reply": "the plan", "artifacts": {"plan": "/a/plan.md"}, "status": "completed"},
        "review": [{"reply": "r0"}, {"reply": "r1"}],
    },
    "item": "x.py",
}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Plan {{ vars.target }}", "Plan src"),
        ("{{ legs.plan.reply }} at {{ legs['plan'].artifacts.plan }}", "the plan at /a/plan.md"),
        ("{% for r in legs.review %}{{ loop.index0 }}={{ r.reply }};{% endfor %}", "0=r0;1=r1;"),
        ("{{ legs.review | length }} {{ item | upper }}", "2 X.PY"),
        ("{{ vars.n | int + 1 }}", "4"),
        ("no template at all\n", "no template at all\n"),
    ],
)
def test_render(text: str, expected: str) -> None:
    assert render(text, CONTEXT) == expected


@pytest.mark.parametrize(
    "text",
    [
        "{{ ''.__class__ }}",
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        "{{ vars.__class__.__init__.__globals__ }}",
        "{{ legs.plan.reply.__class__ }}",
        "{{ cycler.__init__.__globals__.os }}",
        "{{ '{0.__class__}'.format(item) }}",
        "{{ ().__class__.__base__ }}",
    ],
)
def test_the_sandbox_refuses_reaching_python_internals(text: str) -> None:
    with pytest.raises(TemplateError):
        render(text, CONTEXT)


@pytest.mark.parametrize(
    "text",
    ["{{ vars.missing }}", "{{ nothing }}", "{{ legs.ghost.reply }}", "{{ legs.plan.nope }}"],
)
def test_a_missing_name_is_an_error_not_an_empty_string(text: str) -> None:
    with pytest.raises(TemplateError):
        render(text, CONTEXT)


def test_a_type_error_in_a_template_is_a_template_error() -> None:
    with pytest.raises(TemplateError, match="TypeError"):
        render("{{ vars.n + 1 }}", CONTEXT)


def test_a_syntax_error_names_the_template_line() -> None:
    with pytest.raises(TemplateError, match="syntax error on its line 2"):
        render("ok\n{{ x", CONTEXT)
    with pytest.raises(TemplateError, match="syntax error on its line 1"):
        references("{% if %}")


def test_references_read_what_a_template_uses() -> None:
    refs = references(
        "{{ legs.plan.reply }} {{ legs['review'] }} {{ vars.target }} {{ vars['n'] }} {{ item }}"
        "{% for r in legs.review %}{{ r.reply }}{% endfor %}"
    )
    assert refs.legs == {"plan", "review"}
    assert refs.vars == {"target", "n"}
    assert refs.names == {"legs", "vars", "item"}
    assert not refs.dynamic_legs
    assert not refs.private


@pytest.mark.parametrize(
    ("text", "dynamic"),
    [
        ("{{ legs[vars.which].reply }}", True),
        ("{% for name in legs %}{{ name }}{% endfor %}", True),
        ("{{ legs }}", True),
        ("{{ legs.a.reply }}", False),
    ],
)
def test_reading_legs_by_a_computed_key_is_flagged(text: str, dynamic: bool) -> None:
    assert references(text).dynamic_legs is dynamic


def test_loop_and_set_names_are_not_free_names() -> None:
    refs = references("{% set item = 1 %}{% for x in [1] %}{{ x }}{{ item }}{% endfor %}")
    assert refs.names == frozenset()


def test_private_attributes_are_reported() -> None:
    assert references("{{ ''.__class__ }} {{ vars['_x'] }}").private == {"__class__", "_x"}


def test_referenced_legs() -> None:
    assert referenced_legs("{{ legs.a.reply }} {{ legs['b'] }} {{ other.c }}") == {"a", "b"}


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("{{ vars.x | nosuchfilter }}", "no filter named 'nosuchfilter'"),
        ("{% if vars.x is nosuchtest %}y{% endif %}", "no test named 'nosuchtest'"),
        ("{% filter nosuchblock %}x{% endfilter %}", "no filter named 'nosuchblock'"),
    ],
)
def test_an_unknown_filter_or_test_is_a_template_error_before_start(
    text: str, fragment: str
) -> None:
    """Jinja2 finds these only when it compiles, which reading a template's names does:
    it must come out as a TemplateError (a file:line problem), never a traceback."""
    with pytest.raises(TemplateError, match=fragment):
        references(text)
