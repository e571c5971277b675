// The console works without this script; it only redraws the progress page live. Each second it fetches the
// page's live part (server-rendered HTML, the same template as the page) and swaps it in, and slows to every
// two seconds while nothing is running.
(function () {
  "use strict";
  var live = document.querySelector("[data-live]");
  if (!live || !window.fetch) { return; }
  var url = live.getAttribute("data-live");
  function running() { return live.querySelector('[data-finished="false"]') !== null; }
  function next() { window.setTimeout(poll, running() ? 1000 : 2000); }
  function poll() {
    window.fetch(url, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (response) {
        if (response.redirected || !response.ok) { throw new Error("progress " + response.status); }
        return response.text();
      })
      .then(function (html) { live.innerHTML = html; live.setAttribute("data-updated", String(Date.now())); })
      .catch(function () { live.setAttribute("data-stale", "true"); })
      .then(next);
  }
  window.setTimeout(poll, 1000);
})();
