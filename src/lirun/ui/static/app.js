// lirun dashboard: live updates. One EventSource per page; when a change concerns what
// the page shows (data-live on <main>: "*" for any, else ids), the page's own HTML is
// fetched again and its #live-region (else its <main>) swapped in: a filter form being
// filled in is never replaced under the person's hands. No inline script anywhere (CSP: script-src
// 'self'); fetched HTML is parsed by DOMParser, whose scripts never run.
(function () {
  "use strict";
  var main = document.getElementById("main");
  var badge = document.getElementById("live");
  if (!main || !window.EventSource) { return; }
  var timer = null;
  var busy = false;
  var again = false;

  function setLive(on, text) {
    if (!badge) { return; }
    badge.textContent = text;
    badge.className = on ? "live on" : "live off";
  }

  function wanted(change) {
    var spec = main.getAttribute("data-live") || "";
    if (spec === "*") { return true; }
    var ids = spec.split(/\s+/);
    return ids.indexOf(change.id) >= 0 || (!!change.parent && ids.indexOf(change.parent) >= 0);
  }

  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    fetch(window.location.href, { credentials: "same-origin", headers: { "X-Lirun-Refresh": "1" } })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.getElementById("main");
        if (!fresh) { return; }
        var region = document.getElementById("live-region");
        var freshRegion = doc.getElementById("live-region");
        var open = {};
        main.querySelectorAll("details[open][id]").forEach(function (d) { open[d.id] = true; });
        if (region && freshRegion) {
          region.innerHTML = freshRegion.innerHTML;
        } else {
          main.innerHTML = fresh.innerHTML;
        }
        main.setAttribute("data-live", fresh.getAttribute("data-live") || "");
        Object.keys(open).forEach(function (id) {
          var d = document.getElementById(id);
          if (d) { d.open = true; }
        });
        main.setAttribute("data-refreshed", String(Date.now()));
      })
      .catch(function () { /* the next change tries again */ })
      .then(function () {
        busy = false;
        if (again) { again = false; schedule(0); }
      });
  }

  // At most one refresh per MIN_GAP_MS: a busy fleet (hundreds of changes a second) costs
  // each open page ten page reads a second at most, not one per change.
  var MIN_GAP_MS = 100;
  var lastRefresh = 0;

  function schedule(ms) {
    if (timer !== null) { return; }
    var wait = Math.max(ms, lastRefresh + MIN_GAP_MS - Date.now());
    timer = window.setTimeout(function () {
      timer = null;
      lastRefresh = Date.now();
      refresh();
    }, wait);
  }

  // The navigation bar's needs-you count: read again after every change the stream
  // pushes (at most once per COUNT_GAP_MS), and every COUNT_EVERY_MS for what time alone
  // makes true (a schedule falls overdue, an owner's heartbeat goes stale).
  var countEl = document.getElementById("attention-count");
  var countTimer = null;
  var COUNT_GAP_MS = 500;
  var COUNT_EVERY_MS = 30000;

  function readCount() {
    countTimer = null;
    if (!countEl) { return; }
    fetch("/api/attention", { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
      .then(function (data) {
        var n = Number(data.count) || 0;
        countEl.textContent = String(n);
        countEl.setAttribute("data-count", String(n));
        countEl.className = n ? "count some" : "count none";
      })
      .catch(function () { /* the next change tries again */ });
  }

  function countSoon() {
    if (countTimer === null) { countTimer = window.setTimeout(readCount, COUNT_GAP_MS); }
  }

  var source = null;
  var left = false;  // the page was left (pagehide): no stream until it is shown again

  function connect() {
    if (source !== null) { return; }
    source = new EventSource("/events");
    source.addEventListener("open", function () { setLive(true, "live"); });
    source.addEventListener("error", function () {
      setLive(false, "reconnecting…");
      // A refusal (503: the server holds as many streams as it takes) closes the stream
      // for good: ask again later, as its Retry-After says, not at once.
      if (source !== null && source.readyState === EventSource.CLOSED) {
        source = null;
        window.setTimeout(function () { if (!left) { connect(); } },
          10000 + Math.floor(Math.random() * 5000));
      }
    });
    source.addEventListener("hello", function () { setLive(true, "live"); });
    source.addEventListener("reset", function () { schedule(0); countSoon(); });
    source.addEventListener("stale", function () { setLive(false, "database unreachable"); });
    source.addEventListener("recovered", function () { setLive(true, "live"); schedule(0); countSoon(); });
    // A worker came or went (or stopped beating): the workers page looks again.
    source.addEventListener("workers", function () {
      if (document.getElementById("workers-page") || document.getElementById("attention-page")) {
        schedule(0);
      }
      countSoon();
    });
    // A team has new messages (no history row): its page, and its show's, look again.
    source.addEventListener("team", function (event) {
      var change;
      try { change = JSON.parse(event.data); } catch (e) { return; }
      if (wanted(change)) { schedule(30); }
    });
    source.addEventListener("transition", function (event) {
      var change;
      try { change = JSON.parse(event.data); } catch (e) { return; }
      if (wanted(change)) { schedule(30); }
      countSoon();
    });
  }

  // A running run's transcript grows without a status change: its section (data-follow)
  // asks every 2 s for what the stream files hold now (204 while they are unchanged).
  // Only files are read for it; the section stops following once the run has ended.
  function follow() {
    var section = document.querySelector("#transcript[data-follow]");
    if (!section) { return; }
    var url = section.getAttribute("data-follow") + "?since=" +
      encodeURIComponent(section.getAttribute("data-sig") || "");
    fetch(url, { credentials: "same-origin" })
      .then(function (r) {
        if (r.status !== 200) { return null; }
        var signature = r.headers.get("X-Transcript-Signature") || "";
        return r.text().then(function (html) {
          var current = document.querySelector("#transcript[data-follow]");
          if (current) {
            current.innerHTML = html;
            current.setAttribute("data-sig", signature);
          }
        });
      })
      .catch(function () { /* the next tick tries again */ });
  }
  window.setInterval(follow, 2000);
  readCount();
  window.setInterval(function () {
    countSoon();
    if (document.getElementById("attention-page")) { schedule(0); }
  }, COUNT_EVERY_MS);

  // A page left for another (perhaps kept in the back-forward cache) lets its stream go:
  // browsers allow six connections to one server, and kept streams would use them up.
  window.addEventListener("pagehide", function () {
    left = true;
    if (source !== null) { source.close(); source = null; }
    setLive(false, "offline");
  });
  window.addEventListener("pageshow", function (event) {
    left = false;
    if (event.persisted) { connect(); schedule(0); }
  });

  // After the load event: a stream opened while the page loads would keep it "loading".
  if (document.readyState === "complete") {
    connect();
  } else {
    window.addEventListener("load", function () { window.setTimeout(connect, 0); });
  }
})();
