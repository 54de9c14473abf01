// lirun dashboard: live updates. One EventSource per page; when a change concerns what
// the page shows (data-live on <main>: "*" for any, else ids), the page's own HTML is
// fetched again and its <main> swapped in. No inline script anywhere (CSP: script-src
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
    return spec.split(/\s+/).indexOf(change.id) >= 0;
  }

  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    fetch(window.location.href, { credentials: "same-origin", headers: { "X-Lirun-Refresh": "1" } })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("main");
        if (!fresh) { return; }
        var open = {};
        main.querySelectorAll("details[open][id]").forEach(function (d) { open[d.id] = true; });
        main.innerHTML = fresh.innerHTML;
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

  function schedule(ms) {
    if (timer !== null) { return; }
    timer = window.setTimeout(function () { timer = null; refresh(); }, ms);
  }

  var source = new EventSource("/events");
  source.addEventListener("open", function () { setLive(true, "live"); });
  source.addEventListener("error", function () { setLive(false, "reconnecting…"); });
  source.addEventListener("hello", function () { setLive(true, "live"); });
  source.addEventListener("reset", function () { schedule(0); });
  source.addEventListener("transition", function (event) {
    var change;
    try { change = JSON.parse(event.data); } catch (e) { return; }
    if (wanted(change)) { schedule(30); }
  });
})();
