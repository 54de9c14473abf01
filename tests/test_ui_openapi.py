"""Every route of the dashboard's OpenAPI document answers what the document says
(issue 20, item 7): one small home is built for real (a run, a failed flow, a show, a
schedule with runs, a live worker, teams with messages, things that need a person), each
route is called, and each body is validated with ``jsonschema`` against the schema the
document gives for that status: 200 on a record that exists, 404 on one that does not,
400 on a filter the page cannot use, 401 without the token. On both backends."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012
from starlette.testclient import TestClient

from lirun.liveness import current_owner
from lirun.shows.report import provider_failure
from lirun.store import open_store
from lirun.store.rows import SessionRow
from lirun.ui.app import create_app
from lirun.ui.openapi import openapi_document
from support.jsonhome import Home, build_home
from support.storekit import raw_write

DOC_URI = "urn:lirun:dashboard-openapi"


def _validator(doc: dict[str, Any], path: str, status: str) -> jsonschema.Draft202012Validator:
    """A validator for the body ``path`` answers with ``status``, as ``doc`` documents it."""
    answer = doc["paths"][path]["get"]["responses"][status]
    schema = answer["content"]["application/json"]["schema"]
    assert schema != {"type": "object"}, f"{path} {status}: an empty schema checks nothing"
    resource = Resource.from_contents(doc, default_specification=DRAFT202012)
    registry: Registry[Any] = Registry().with_resource(DOC_URI, resource)
    target = {"$ref": DOC_URI + schema["$ref"]} if "$ref" in schema else schema
    return jsonschema.Draft202012Validator(target, registry=registry)


def _check(doc: dict[str, Any], path: str, response: Any, status: int) -> Any:
    assert response.status_code == status, (path, response.status_code, response.text[:300])
    body = response.json()
    errors = list(_validator(doc, path, str(status)).iter_errors(body))
    assert not errors, (path, status, [(list(e.absolute_path), e.message) for e in errors[:5]])
    return body


def test_every_component_is_a_valid_json_schema() -> None:
    doc = openapi_document()
    assert doc["openapi"] == "3.1.0"
    for name, schema in doc["components"]["schemas"].items():
        jsonschema.Draft202012Validator.check_schema(schema)
        assert "schema" not in schema.get("required", ()), name  # the API has no such key
    for path, item in doc["paths"].items():
        for status, answer in item["get"]["responses"].items():
            assert "content" in answer, (path, status)


def test_a_provider_stop_is_its_component() -> None:
    """A play its provider stopped is rare to build for real: the board's ``provider``
    (shows.report.provider_failure) is checked against its component directly."""
    doc = openapi_document()
    resource = Resource.from_contents(doc, default_specification=DRAFT202012)
    registry: Registry[Any] = Registry().with_resource(DOC_URI, resource)
    schema = {"$ref": DOC_URI + "#/components/schemas/ProviderStop"}
    validator = jsonschema.Draft202012Validator(schema, registry=registry)
    given = {"id": "s1", "status_reason_code": "run.failed.provider_rate_limit"}
    stopped = provider_failure(SessionRow.from_row({**dict.fromkeys(SessionRow._fields), **given}))
    validator.validate(stopped)
    with pytest.raises(jsonschema.ValidationError):
        validator.validate({**(stopped or {}), "retryable": "yes"})


def _home(db_url: str, tmp_path: Path) -> Home:
    (tmp_path / "built").mkdir()
    home = Home(tmp_path / "built")
    home.env["LIRUN_DB_URL"] = db_url
    build_home(home)
    home.li("schedule", "apply", str(home.root / "schedules.yaml"))
    fired = json.loads(home.li("schedule", "fire", "hourly", "--json"))["id"]
    store = open_store(db_url)
    try:  # a worker holding the fired run: a worker's runs, each linked
        worker = store.workers.register(
            owner=current_owner(), concurrency=1, transport="local", lease_seconds=600
        )
        assert store.schedules.claim_run(fired, worker_id=worker, lease_seconds=600)
        # what it made cost something: the schedules' cost charts have bars to validate
        made = store.sessions.create(owner_pid=None, provider="command")
        store.update_fields("session", made.id, {"cost_usd": 0.01})
        raw_write(store, "UPDATE schedule_runs SET session_id = :s WHERE id = :id",
                  {"s": made.id, "id": fired})  # fmt: skip
    finally:
        store.close()
    home.li("override", "session", home.ids["run"], "--to", "failed", "--reason",
            "run.failed.admin", "--actor", "t", "--justification", "j")  # fmt: skip
    said = home.li("run", "--json", "--", "sh", "-c", "echo out; echo err >&2")
    home.ids["said"] = json.loads(said)["run_id"]  # a transcript with entries
    return home


def test_every_route_answers_as_its_document_says(db_url: str, tmp_path: Path) -> None:
    home = _home(db_url, tmp_path)
    with TestClient(create_app(db_url, watch=False)) as client:
        doc = client.get("/api/openapi.json").json()
        _check(doc, "/api/openapi.json", client.get("/api/openapi.json"), 200)
        teams = client.get("/api/teams").json()["teams"]
        crew = next(t["id"] for t in teams if t["name"] == "crew")  # the one with messages
        values = {
            "run_id": home.ids["run"],
            "flow_id": home.ids["flow"],
            "show_id": home.ids["show"],
            "name": "hourly",
            "team_id": crew,
        }
        seen: dict[str, Any] = {}
        for path, item in doc["paths"].items():
            params = item["get"].get("parameters", [])
            concrete = path.format(**values)
            seen[path] = _check(doc, path, client.get(concrete), 200)
            if any(p["in"] == "path" for p in params):
                missing = path.format(**dict.fromkeys(values, "no-such-record"))
                _check(doc, path, client.get(missing), 404)
            if any(p["name"] == "since" for p in params):
                _check(doc, path, client.get(concrete, params={"since": "someday"}), 400)
        _check(doc, "/api/runs", client.get("/api/runs", params={"kind": "show"}), 200)
        # Each execution a flow or a show made (lineage: the plays it backs, its flow).
        made = [str(s["id"]) for s in seen["/api/flows/{flow_id}"]["runs"]]
        made += [str(p["session_id"]) for p in seen["/api/shows/{show_id}"]["plays"]]
        lineages = [
            _check(doc, "/api/runs/{run_id}", client.get(f"/api/runs/{ident}"), 200)["lineage"]
            for ident in made
        ]
        said = client.get(f"/api/runs/{home.ids['said']}")
        assert _check(doc, "/api/runs/{run_id}", said, 200)["transcript"]["entries"]
        _check(doc, "/api/runs", client.get("/api/runs", params={"kind": "nope"}), 400)
    # The home gave every list something to validate, so no schema passed on emptiness.
    assert seen["/api/runs"]["runs"]
    assert seen["/api/flows"]["flows"]
    assert seen["/api/shows"]["shows"]
    assert seen["/api/attention"]["items"]
    assert any(w["runs"] for w in seen["/api/workers"]["workers"])
    assert any(s["recent"] and s["chart"] for s in seen["/api/schedules"]["schedules"])
    assert seen["/api/schedules/{name}"]["runs"]
    assert seen["/api/teams/{team_id}"]["messages"]
    assert seen["/api/runs/{run_id}"]["transitions"]
    assert seen["/api/flows/{flow_id}"]["report"]
    assert seen["/api/shows/{show_id}"]["board"]
    assert any(ln["plays"] for ln in lineages)
    assert seen["/api/runs/{run_id}"]["admin_events"]


def test_a_request_without_the_token_is_the_documented_401(tmp_path: Path) -> None:
    db = str(tmp_path / "state.db")
    home = Home(tmp_path)
    home.env["LIRUN_DB_URL"] = db
    home.li("db", "migrate")
    doc = openapi_document()
    with TestClient(create_app(db, token="s3cret", watch=False)) as client:
        for path in doc["paths"]:
            answer = client.get(path.replace("{", "").replace("}", ""))
            assert answer.status_code == 401, path
            assert "text/plain" in doc["paths"][path]["get"]["responses"]["401"]["content"]
            assert answer.headers["content-type"].startswith("text/plain")


def test_every_api_route_is_in_the_document_and_no_other(tmp_path: Path) -> None:
    db = str(tmp_path / "state.db")
    home = Home(tmp_path)
    home.env["LIRUN_DB_URL"] = db
    home.li("db", "migrate")
    app: Any = create_app(db, watch=False)
    routes = {r.path for r in app.app.routes if getattr(r, "path", "").startswith("/api")}
    assert routes == set(openapi_document()["paths"])
    assert json.loads(json.dumps(openapi_document())) == openapi_document()  # plain JSON
