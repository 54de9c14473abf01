"""The dashboard in a real browser: Debian's Chromium, headless, driven by Selenium
through Debian's matching chromedriver, against a real uvicorn server.

One browser and one server for the module. Each page's screenshot is saved under the
test output directory. Without Chromium these tests skip, unless
LIRUN_TEST_REQUIRE_BROWSER=1 (CI), where they fail.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from lirun.store import Store, open_store
from support.cli import li_command
from support.uikit import PAYLOADS, XSS_IMG, XSS_NAME, XSS_SCRIPT, claude_stream, make_run, serve

if TYPE_CHECKING:  # selenium is imported where a test runs, so its absence is a skip
    from selenium.webdriver.chrome.webdriver import WebDriver
    from selenium.webdriver.remote.webelement import WebElement

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
TOKEN = "browser-token-0123456789"


def _browser_missing() -> str | None:
    if not (shutil.which("chromium") or os.path.exists(CHROMIUM)):
        return "Debian's chromium is not installed (apt-get install chromium chromium-driver)"
    if not os.path.exists(CHROMEDRIVER):
        return "Debian's chromium-driver is not installed (apt-get install chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (the dev group has it)"
    return None


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    missing = _browser_missing()
    if missing:
        if os.environ.get("LIRUN_TEST_REQUIRE_BROWSER") == "1":
            pytest.fail(f"LIRUN_TEST_REQUIRE_BROWSER=1 but {missing}")
        pytest.skip(missing)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1280,1000",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # CSP refusals, 404s
    browser = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    browser.set_page_load_timeout(30)
    try:
        yield browser
    finally:
        browser.quit()


@dataclass
class Site:
    base: str
    store: Store
    home: Path
    shots: Path
    env: dict[str, str]
    flow_id: str
    show_id: str


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("ui-site")
    home = root / "home"
    home.mkdir()
    db = str(root / "state.db")
    env = {**os.environ, "LIRUN_HOME": str(home), "LIRUN_DB_URL": db}
    store = open_store(db)
    make_run(
        store,
        home,
        "xss-run",
        prompt=XSS_SCRIPT,
        reply=XSS_IMG,
        summary="javascript:alert(9) " + XSS_IMG,
        stream=claude_stream(text=XSS_SCRIPT, tool=XSS_IMG, result=XSS_IMG),
        artifacts={XSS_NAME: b"<script>alert(5)</script>", "report.md": b"# report"},
    )
    now = time.time()
    store.sessions.import_many(
        {
            "id": f"bulk-{i:03d}",
            "status": "timed_out" if i % 4 == 0 else "completed",
            "reason_code": "run.timed_out.deadline" if i % 4 == 0 else "run.completed.ok",
            "created_at": now - 3600 + i,
            "provider": "codex",
            "prompt": f"bulk task {i}",
        }
        for i in range(120)
    )
    flow_file = root / "flow.yaml"
    flow_file.write_text(
        "legs:\n  - id: plan\n    run: [sh, -c, 'echo planned']\n"
        "  - id: check\n    depends_on: [plan]\n    run: [sh, -c, 'exit 1']\n"
    )
    import subprocess

    out = subprocess.run(
        li_command("flow", "run", str(flow_file)),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    flow_id = out.stdout.split("\t", 1)[0].strip()
    show = store.shows.create(topic="add-auth")
    for name in ("models", "api", XSS_SCRIPT):
        store.shows.create_play(show_id=show.id, name=name)
    shots = Path(os.environ.get("LIRUN_TEST_SCREENSHOTS") or root / "screenshots")
    shots.mkdir(parents=True, exist_ok=True)
    try:
        # The dashboard serves artifacts from its own home's runs only, as `li ui` run
        # with the LIRUN_HOME the runs were made under.
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("LIRUN_HOME", str(home))
            with serve(db) as base:
                yield Site(base, store, home, shots, env, flow_id, show.id)
    finally:
        store.close()


def shot(site: Site, browser: WebDriver, name: str) -> Path:
    path = site.shots / f"{name}.png"
    assert browser.save_screenshot(str(path))
    assert path.stat().st_size > 1000
    return path


def attr(element: WebElement, name: str) -> str:
    """The element's attribute ``name``, which the page must have given it."""
    value = element.get_attribute(name)
    assert value is not None, f"no {name} attribute"
    return value


def assert_inert(browser: WebDriver, scripts: tuple[str, ...] = ("app.js",)) -> None:
    """No payload ran (no alert, no flag) and none became an element; the only scripts
    are ``scripts`` (the dashboard's own file on its pages, none in an artifact)."""
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By

    b: WebDriver = browser
    with pytest.raises(NoAlertPresentException):
        b.switch_to.alert.text  # noqa: B018
    assert b.execute_script("return window.__pwned") is None
    assert b.find_elements(By.CSS_SELECTOR, "img[src='x'], img[onerror]") == []
    found = b.find_elements(By.TAG_NAME, "script")
    assert tuple(attr(s, "src").rsplit("/", 1)[-1] for s in found) == scripts
    hrefs = [a.get_attribute("href") or "" for a in b.find_elements(By.TAG_NAME, "a")]
    assert not any(h.lower().startswith("javascript:") for h in hrefs)


def wait_live(browser: WebDriver) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 10).until(lambda b: b.find_element("id", "live").text == "live")


def test_runs_page_lists_runs_and_escapes_payloads(site: Site, driver: WebDriver) -> None:
    from selenium.webdriver.common.by import By

    b: WebDriver = driver
    b.get(site.base + "/")
    rows = b.find_elements(By.CSS_SELECTOR, "#runs tbody tr")
    assert len(rows) == 50
    assert b.find_element(By.ID, "run-xss-run")
    page = b.page_source
    assert all(p not in page for p in PAYLOADS[:2])
    assert_inert(b)
    shot(site, b, "runs")


def test_a_finished_run_appears_within_a_second_without_a_reload(
    site: Site, driver: WebDriver
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    b: WebDriver = driver
    b.get(site.base + "/")
    wait_live(b)
    b.execute_script("window.__same_page = 42")
    started = time.monotonic()
    make_run(site.store, site.home, "fresh-run", prompt="just finished", reply="ok")
    WebDriverWait(b, 1.0, poll_frequency=0.02).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, "#run-fresh-run[data-status='completed']")
    )
    elapsed = time.monotonic() - started
    assert elapsed <= 1.0
    assert b.execute_script("return window.__same_page") == 42
    first = b.find_elements(By.CSS_SELECTOR, "#runs tbody tr")[0]
    assert first.get_attribute("id") == "run-fresh-run"
    shot(site, b, "runs-live")


def test_filters_and_pagination(site: Site, driver: WebDriver) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    b: WebDriver = driver
    b.get(site.base + "/")
    Select(b.find_element(By.ID, "f-status")).select_by_value("timed_out")
    b.find_element(By.ID, "f-provider").send_keys("codex")
    b.find_element(By.ID, "f-apply").click()
    WebDriverWait(b, 10).until(lambda d: "status=timed_out" in d.current_url)
    statuses = {
        r.get_attribute("data-status") for r in b.find_elements(By.CSS_SELECTOR, "#runs tbody tr")
    }
    assert statuses == {"timed_out"}
    assert len(b.find_elements(By.CSS_SELECTOR, "#runs tbody tr")) == 30
    shot(site, b, "runs-filtered")
    b.get(site.base + "/?kind=session&provider=codex")
    first = [attr(r, "id") for r in b.find_elements(By.CSS_SELECTOR, "#runs tbody tr")]
    b.find_element(By.ID, "next-page").click()
    WebDriverWait(b, 10).until(lambda d: "cursor=" in d.current_url)
    second = [attr(r, "id") for r in b.find_elements(By.CSS_SELECTOR, "#runs tbody tr")]
    assert len(first) == 50
    assert len(second) == 50
    assert not set(first) & set(second)
    assert first[-1] > second[0]  # newest first, continuing where the first page ended
    assert "provider=codex" in b.current_url
    page2 = b.current_url
    b.find_element(By.ID, "next-page").click()
    WebDriverWait(b, 10).until(lambda d: d.current_url != page2)
    third = b.find_elements(By.CSS_SELECTOR, "#runs tbody tr")
    assert len(third) == 20
    assert not b.find_elements(By.ID, "next-page")
    shot(site, b, "runs-page-3")


def test_run_page_shows_history_evidence_and_transcript(site: Site, driver: WebDriver) -> None:
    from selenium.webdriver.common.by import By

    b: WebDriver = driver
    b.get(site.base + "/runs/xss-run")
    history = b.find_elements(By.CSS_SELECTOR, "#history .tl-item")
    assert len(history) == 2
    assert "run.completed.ok" in history[1].text
    evidence = b.find_element(By.ID, "evidence")
    assert "final reply counted as evidence" in evidence.text  # a sentence, not JSON
    assert "assistant_output" not in evidence.text  # the raw JSON waits behind its toggle
    transcript = b.find_element(By.ID, "transcript")
    assert XSS_SCRIPT in transcript.text  # shown as text, not run
    call = transcript.find_element(By.CSS_SELECTOR, "details.tool_call")
    call.find_element(By.TAG_NAME, "summary").click()
    assert call.get_attribute("open") is not None
    links = [a.text for a in b.find_elements(By.CSS_SELECTOR, "#artifacts a.artifact")]
    assert XSS_NAME in links
    assert "report.md" in links
    assert_inert(b)
    shot(site, b, "run")
    # Opened as a person would from the link (its href, not a click: chromedriver waits
    # forever on a click that lands in a sandboxed document).
    b.get(attr(b.find_element(By.LINK_TEXT, XSS_NAME), "href"))
    assert "<script>alert(5)</script>" in b.find_element(By.TAG_NAME, "body").text
    assert_inert(b, scripts=())
    shot(site, b, "artifact")


def test_a_running_runs_transcript_grows_on_the_page(site: Site, driver: WebDriver) -> None:
    import json

    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    b: WebDriver = driver
    make_run(site.store, site.home, "still-going", status="running", reply="thinking")
    b.get(f"{site.base}/runs/still-going")
    assert "thinking" in b.find_element(By.ID, "transcript").text
    line = {"type": "assistant", "message": {"content": [{"type": "text", "text": "new words"}]}}
    with open(site.home / "runs" / "still-going" / "stream" / "still-going.jsonl", "a") as f:
        f.write(json.dumps(line) + "\n")
    WebDriverWait(b, 5).until(lambda d: "new words" in d.find_element(By.ID, "transcript").text)
    shot(site, b, "run-following")


def test_flow_graph_renders_and_links_its_legs(site: Site, driver: WebDriver) -> None:
    from selenium.webdriver.common.by import By

    b: WebDriver = driver
    b.get(f"{site.base}/flows/{site.flow_id}")
    graph = b.find_element(By.CSS_SELECTOR, "#flow-graph svg")
    assert graph.size["width"] > 100
    assert "plan" in graph.text
    assert "check" in graph.text
    links = b.find_elements(By.CSS_SELECTOR, "#flow-graph svg a")
    assert len(links) == 2
    shot(site, b, "flow")
    target = links[0].get_attribute("href") or attr(links[0], "xlink:href")
    b.get(target if target.startswith("http") else site.base + target)
    assert "/runs/" in b.current_url
    assert b.find_element(By.ID, "run-id")


def test_a_running_flow_page_shows_a_leg_that_starts_later(site: Site, driver: WebDriver) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    b: WebDriver = driver
    inv = site.store.invocations.create(skill="live-flow")
    b.get(f"{site.base}/flows/{inv.id}")
    wait_live(b)
    site.store.sessions.create(id="late-leg", owner_pid=None, invocation_id=inv.id)
    WebDriverWait(b, 1.0, poll_frequency=0.02).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, "#legs a[href='/runs/late-leg']")
    )


def test_show_board_schedules_and_workers_render(site: Site, driver: WebDriver) -> None:
    from selenium.webdriver.common.by import By

    b: WebDriver = driver
    b.get(f"{site.base}/shows/{site.show_id}")
    cards = b.find_elements(By.CSS_SELECTOR, ".board .card")
    assert len(cards) == 3
    assert any(XSS_SCRIPT in c.text for c in cards)
    assert_inert(b)
    shot(site, b, "show")
    for path, name in (("/schedules", "schedules"), ("/workers", "workers")):
        b.get(site.base + path)
        assert b.find_element(By.TAG_NAME, "h1").text.lower() == name
        shot(site, b, name)


def test_no_page_logs_an_error_in_the_console(site: Site, driver: WebDriver) -> None:
    """A style or script the CSP refuses, or a request that fails (the favicon every
    page asked for was a 404), is an error in the console; a page has none."""
    b: WebDriver = driver
    b.get_log("browser")  # what earlier tests left
    run_id = "xss-run"
    for path in (
        "/",
        f"/runs/{run_id}",
        f"/flows/{site.flow_id}",
        f"/shows/{site.show_id}",
        "/schedules",
        "/workers",
    ):
        b.get(site.base + path)
        wait_live(b)
        errors = [entry["message"] for entry in b.get_log("browser") if entry["level"] == "SEVERE"]
        assert errors == [], (path, errors)


def test_a_token_server_refuses_then_accepts_the_browser(site: Site, driver: WebDriver) -> None:
    from selenium.webdriver.common.by import By

    b: WebDriver = driver
    with serve(site.env["LIRUN_DB_URL"], token=TOKEN) as base:
        b.get(base + "/")
        assert "needs its token" in b.find_element(By.TAG_NAME, "body").text
        b.get(f"{base}/?token={TOKEN}")
        assert "token=" not in b.current_url
        assert b.find_elements(By.CSS_SELECTOR, "#runs tbody tr")
        assert b.execute_script("return document.cookie") == ""  # HttpOnly
        wait_live(b)  # the event stream got through with the cookie
        shot(site, b, "token")


@pytest.mark.postgres
def test_live_updates_on_postgresql(driver: WebDriver, tmp_path: Path) -> None:
    """The same live path over LISTEN/NOTIFY."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from support.pg import make_pg_url

    b: WebDriver = driver
    for url in make_pg_url():
        store = open_store(url)
        try:
            with serve(url) as base:
                b.get(base + "/")
                wait_live(b)
                started = time.monotonic()
                make_run(store, tmp_path, "pg-fresh", reply="ok")
                WebDriverWait(b, 1.0, poll_frequency=0.02).until(
                    lambda d: d.find_elements(
                        By.CSS_SELECTOR, "#run-pg-fresh[data-status='completed']"
                    )
                )
                assert time.monotonic() - started <= 1.0
                # Leave the page while its server still answers: its live count would
                # otherwise ask a stopped server and log the refusal in the next test.
                b.get("about:blank")
        finally:
            store.close()


def _console_errors(browser: WebDriver) -> list[str]:
    return [entry["message"] for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]


def test_flows_shows_and_one_schedule_have_pages(site: Site, driver: WebDriver) -> None:
    import subprocess

    from selenium.webdriver.common.by import By

    b: WebDriver = driver
    added = subprocess.run(
        li_command("schedule", "add", "browser-tick", "--every", "1h", "--", "run", "true"),
        env=site.env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    b.get("about:blank")  # no earlier page asks anything now
    b.get_log("browser")  # what earlier tests left
    for path, row, name in (
        ("/flows", f"flow-{site.flow_id}", "flows"),
        ("/shows", f"show-{site.show_id}", "shows"),
        ("/schedules/browser-tick", "definition", "schedule"),
    ):
        b.get(site.base + path)
        wait_live(b)
        assert b.find_element(By.ID, row)
        assert_inert(b)
        assert _console_errors(b) == [], (path, _console_errors(b))
        shot(site, b, name)
    fires = b.find_element(By.ID, "next-fires").text
    assert "No worker is live" in fires
    b.find_element(By.LINK_TEXT, "Flows").click()
    link = b.find_element(By.CSS_SELECTOR, f"#flow-{site.flow_id} a.flow-link")
    link.click()
    assert b.current_url.endswith(f"/flows/{site.flow_id}")


def test_needs_you_is_counted_in_the_bar_and_grows_live(site: Site, driver: WebDriver) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    b: WebDriver = driver
    b.get(site.base + "/attention")
    wait_live(b)

    def count(d: WebDriver) -> int | None:
        text = d.find_element(By.ID, "attention-count").get_attribute("data-count")
        return int(text) if text else None

    WebDriverWait(b, 10).until(lambda d: count(d) is not None)
    before = count(b)
    rows = b.find_elements(By.CSS_SELECTOR, "#attention tbody tr")
    assert before == len(rows)
    assert before >= 1
    assert b.find_element(By.ID, f"attention-flow-{site.flow_id}")
    play = site.store.shows.create_play(show_id=site.show_id, name="needs-a-person")
    site.store.update_status(
        "play", play.id, new_status="escalated", reason_code="play.escalated.merge_conflict"
    )
    WebDriverWait(b, 5, poll_frequency=0.05).until(
        lambda d: d.find_elements(By.ID, f"attention-play-{play.id}")
    )
    WebDriverWait(b, 5, poll_frequency=0.05).until(lambda d: count(d) == before + 1)
    assert_inert(b)
    assert _console_errors(b) == []
    shot(site, b, "attention")
    b.get(site.base + "/")
    WebDriverWait(b, 10).until(lambda d: count(d) == before + 1)  # every page's bar


def _overflowing_cells(browser: WebDriver) -> list[str]:
    """Cells of the runs table whose content is cut (wider than the cell), the id too:
    it is shown whole, wrapping."""
    return browser.execute_script(
        """
        const cut = [];
        for (const td of document.querySelectorAll('#runs td')) {
          if (td.scrollWidth > td.clientWidth + 1) cut.push(td.className + ': ' + td.innerText);
        }
        return cut;
        """
    )


def test_the_runs_table_fits_1280_pixels(site: Site, driver: WebDriver) -> None:
    """Cost was off-screen and tokens cut at 1,400 px: at 1,280 the whole table shows."""
    from selenium.webdriver.common.by import By

    b: WebDriver = driver
    make_run(
        site.store,
        site.home,
        "wide-run-" + "x" * 40,
        prompt="a long prompt " * 20,
        summary="a long summary that goes on " * 6,
        reason="run.completed_empty.no_evidence",
        status="completed_empty",
    )
    site.store.update_fields(
        "session",
        "wide-run-" + "x" * 40,
        {"input_tokens": 123_456_789, "output_tokens": 98_765_432, "cost_usd": 1234.5678},
    )
    b.set_window_size(1280, 1000)
    b.get(site.base + "/")
    width = b.execute_script("return document.documentElement.clientWidth")
    page = b.execute_script("return document.documentElement.scrollWidth")
    assert page <= width, f"the page scrolls sideways: {page} > {width}"
    last = b.find_elements(By.CSS_SELECTOR, "#runs thead th")[-1]
    assert last.text == "cost"
    assert last.rect["x"] + last.rect["width"] <= width
    assert _overflowing_cells(b) == []
    row = b.find_element(By.ID, "run-wide-run-" + "x" * 40)
    assert "$1234.5678" in row.text
    assert "123,456,789 in" in row.text.replace("\n", " ")
    shot(site, b, "runs-1280")


def test_a_run_page_explains_its_evidence_with_raw_json_behind_a_toggle(
    site: Site, driver: WebDriver, tmp_path: Path
) -> None:
    import re
    import subprocess

    from selenium.webdriver.common.by import By

    from support.gitkit import GIT_ENV, make_repo

    repo = make_repo(tmp_path / "repo")
    script = "echo x > f && git add f && git commit -qm x && { sleep 60 & sleep 0.5; } ; echo done"
    ran = subprocess.run(
        li_command("run", "--require-change", "--", "sh", "-c", script),
        env={**site.env, **GIT_ENV}, cwd=repo, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    said = re.search(r"run (\S+) completed", ran.stderr)
    assert said is not None, ran.stderr
    run_id = said.group(1)
    b: WebDriver = driver
    b.get(f"{site.base}/runs/{run_id}")
    evidence = b.find_element(By.ID, "evidence")
    assert "1 commit since it started" in evidence.text
    assert "1 process the run left behind was ended with SIGTERM" in evidence.text
    killed = evidence.find_element(By.CSS_SELECTOR, "li.ev-killed_descendants table.ev-table")
    assert "sleep 60" in killed.text
    raw = b.find_element(By.CSS_SELECTOR, "#evidence-raw pre")
    assert not raw.is_displayed()
    b.find_element(By.CSS_SELECTOR, "#evidence-raw summary").click()
    assert raw.is_displayed()
    assert '"kind": "killed_descendants"' in raw.text
    command = b.find_element(By.ID, "run-command").text
    assert command.startswith("sh -c ")
    assert_inert(b)
    shot(site, b, "run-evidence")
    b.get(site.base + "/?kind=session")
    what = b.find_element(By.CSS_SELECTOR, f"#run-{run_id} td.what").text
    assert what.startswith("sh -c ")  # the runs list says what ran


def test_a_show_page_says_only_what_its_record_says(site: Site, driver: WebDriver) -> None:
    """A moved head's passing gate is not shown as the final gate; a play merged by hand
    says so, without the feedback of the attempt that failed; a play's place in the file
    is said in words."""
    from selenium.webdriver.common.by import By

    store = site.store
    store.shows.create_with_plays(
        id="browser-truth",
        fields={"topic": "truth", "spec_json": {"final_gate": "pytest -q"}, "base": "main"},
        plays=[{"id": "browser-truth.api", "name": "api", "position": 0, "attempts": 1}],
    )
    store.update_fields(
        "show",
        "browser-truth",
        {"final_gate_json": {"verdict": "pass", "role": "head_gate", "commit": "a" * 40}},
    )
    store.update_status(
        "play", "browser-truth.api", new_status="gate_failed", reason_code="play.gate_failed.check"
    )
    store.update_fields("play", "browser-truth.api", {"feedback": "the gate failed: fix it"})
    store.update_status(
        "play", "browser-truth.api", new_status="merged", reason_code="play.merged.admin",
        source="admin", override=True, override_actor="me", override_justification="by hand",
    )  # fmt: skip
    b: WebDriver = driver
    b.get(site.base + "/shows/browser-truth")
    final = b.find_element(By.ID, "final-gate").text
    assert final.startswith("not run yet")
    assert "passed" not in final
    assert "not the final gate" in b.find_element(By.ID, "head-gate").text
    card = b.find_element(By.ID, "play-browser-truth.api").text
    assert "merged by hand" in card
    assert "fix it" not in card
    assert "#1 in the file" in card
    assert_inert(b)
    shot(site, b, "show-truth")


def test_a_teams_conversation_escapes_payloads_and_grows_live(
    site: Site, driver: WebDriver
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    team = site.store.teams.create_with_members(
        "browser-crew", ["api", "web"], owner_type="show", owner_id=site.show_id
    )
    for text in (XSS_SCRIPT, XSS_IMG):
        site.store.teams.send_message(team.id, sender="api", recipient="all", text=text)
    b: WebDriver = driver
    b.get(f"{site.base}/teams/{team.id}")
    texts = [e.text for e in b.find_elements(By.CSS_SELECTOR, "#messages .message-text")]
    assert texts == [XSS_SCRIPT, XSS_IMG]  # shown as text, whole
    assert_inert(b)
    wait_live(b)
    b.execute_script("window.__same_page = 42")
    site.store.teams.send_message(team.id, sender="web", recipient="api", text="live one")
    WebDriverWait(b, 5, poll_frequency=0.05).until(
        lambda d: len(d.find_elements(By.CSS_SELECTOR, "#messages .message")) == 3
    )
    assert b.execute_script("return window.__same_page") == 42
    assert_inert(b)
    shot(site, b, "team")
    b.get(f"{site.base}/shows/{site.show_id}")
    assert "live one" in b.find_element(By.ID, "team-talk").text
    assert_inert(b)
    shot(site, b, "show-team")
    b.get(f"{site.base}/teams")
    assert b.find_element(By.ID, f"team-{team.id}")
    shot(site, b, "teams")


def test_ids_show_whole_at_1280_pixels(site: Site, driver: WebDriver) -> None:
    """Two runs alike but for their suffix, one pruned: at 1,280 px each id reads whole
    (no ellipsis, nothing hidden past its cell) and the pruned tag shows beside it."""
    from selenium.webdriver.common.by import By

    b: WebDriver = driver
    twins = ["20261204T191523-a1b2c3", "20261204T191523-d4e5f6"]
    for ident in twins:
        make_run(site.store, site.home, ident, prompt="twin " + ident[-6:])
    done = site.store.retention.write_tombstones(
        "session", twins[1:], terminal=["completed"], now=time.time(), actor="li gc"
    )
    assert done == twins[1:]
    b.set_window_size(1280, 1000)
    b.get(site.base + "/")
    for ident in twins:
        cell = b.find_element(By.CSS_SELECTOR, f"#run-{ident} td.id")
        link = cell.find_element(By.TAG_NAME, "a")
        assert link.text.replace("\n", "") == ident
        fits = b.execute_script(
            """
            const td = arguments[0], box = td.getBoundingClientRect();
            const inside = [...td.children].every(e => {
              const r = e.getBoundingClientRect();
              return r.width > 0 && r.left >= box.left - 1 && r.right <= box.right + 1
                && r.bottom <= box.bottom + 1;
            });
            return inside && td.scrollWidth <= td.clientWidth + 1
              && getComputedStyle(td).textOverflow !== 'ellipsis';
            """,
            cell,
        )
        assert fits, f"the id {ident} is cut or spills out of its cell"
    pruned = b.find_element(By.CSS_SELECTOR, f"#run-{twins[1]} td.id .pruned-tag")
    assert pruned.is_displayed()
    assert pruned.text == "pruned"
    assert _overflowing_cells(b) == []
    shot(site, b, "runs-whole-ids")


def test_long_text_wraps_inside_the_show_boards_cards(site: Site, driver: WebDriver) -> None:
    """A play's long branch, feedback and unknown column, none with a space to break at:
    at 1,280 px every card holds its text (nothing wider than the card, no sideways
    scroll of the page)."""
    b: WebDriver = driver
    unbroken = "refactor/" + "very-long-branch-name-" * 12
    show = site.store.shows.create_with_plays(
        id="show-wide",
        fields={"topic": "wide", "integration": "show/wide", "base": "main"},
        plays=[
            {"id": "show-wide.api", "name": "api-" + "n" * 80, "position": 0, "attempts": 3},
            {"id": "show-wide.ui", "name": "ui", "position": 1, "attempts": 3},
        ],
    )  # fmt: skip
    site.store.update_status("play", "show-wide.api", new_status="gate_failed",
                             reason_code="play.gate_failed.check")  # fmt: skip
    site.store.update_fields(
        "play",
        "show-wide.api",
        {"feedback": "F" * 150, "attempt": 1, "branch": unbroken, "worktree": "/w/" + "d" * 150},
    )
    b.set_window_size(1280, 1000)
    b.get(f"{site.base}/shows/{show.id}")
    spilled = b.execute_script(
        """
        const out = [];
        for (const card of document.querySelectorAll('.card')) {
          const box = card.getBoundingClientRect();
          if (card.scrollWidth > card.clientWidth + 1) out.push(card.id + ' scrolls');
          for (const e of card.querySelectorAll('*')) {
            const r = e.getBoundingClientRect();
            if (r.width && r.right > box.right + 1) out.push(card.id + ': ' + e.tagName);
          }
        }
        return out;
        """
    )
    assert spilled == []
    width = b.execute_script("return document.documentElement.clientWidth")
    page = b.execute_script("return document.documentElement.scrollWidth")
    assert page <= width, f"the page scrolls sideways: {page} > {width}"
    shot(site, b, "show-wide-cards")
