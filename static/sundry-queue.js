// The desk queue, live: a websocket (sundry/live/queue.py) pushes the counts, badges and table
// for this page's view whenever a ticket changes; they replace the page's copies by id. Rows
// that were not on the page before are marked as arrived; the row picked with j/k stays picked.
(function () {
  "use strict";
  const SYNC_EVERY_MS = 20000;
  const root = document.querySelector("[data-live-queue]");
  if (!root) return;
  let socket = null;
  let retry = 1000;
  const arrived = new Set();  // rows pushed in since the page loaded, marked until it reloads

  function status(text, state) {
    const el = document.getElementById("live-status");
    if (el) { el.textContent = text; el.dataset.state = state; }
  }
  function send(message) {
    if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(message));
  }
  function rowIds() {
    return new Set(Array.from(document.querySelectorAll("#queue-table tr[data-ticket]"), (r) => r.dataset.ticket));
  }
  function apply(html) {
    const before = rowIds();
    const picked = document.querySelector("#queue-table tr.selected");
    const pickedId = picked && picked.dataset.ticket;
    const hadFocus = picked && picked.contains(document.activeElement);
    const template = document.createElement("template");
    template.innerHTML = html;
    Array.from(template.content.children).forEach((el) => {
      const old = el.id && document.getElementById(el.id);
      if (!old) return;
      old.replaceWith(el);
      if (window.htmx) htmx.process(el);
    });
    document.querySelectorAll("#queue-table tr[data-ticket]").forEach((row) => {
      if (!before.has(row.dataset.ticket)) arrived.add(row.dataset.ticket);
      if (arrived.has(row.dataset.ticket)) row.classList.add("arrived");
      if (row.dataset.ticket === pickedId) {
        row.classList.add("selected");
        const link = row.querySelector("a");
        if (hadFocus && link) link.focus({ preventScroll: true });
      }
    });
    document.dispatchEvent(new CustomEvent("sundry:queue"));
  }
  function connect() {
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    socket = new WebSocket(scheme + location.host + root.dataset.liveQueue + location.search);
    socket.onopen = () => { retry = 1000; status("Live", "live"); };
    socket.onmessage = (e) => {
      let message = null;
      try { message = JSON.parse(e.data); } catch (_) { return; }
      if (message && message.type === "queue") apply(message.html);
    };
    socket.onclose = (e) => {
      socket = null;
      if (e.code === 4401) { status("You signed out; live updates stopped.", "off"); return; }
      if (e.code === 4403) { status("Live updates are not available for this page.", "off"); return; }
      if (e.code === 4429) { status("Too many live pages open: close some and reload this one.", "off"); return; }
      status(e.code === 1013 ? "The server is busy; reconnecting shortly…" : "Reconnecting…", "retry");
      setTimeout(connect, retry);
      retry = Math.min(retry * 2, 30000);
    };
  }
  // The filters change the view over HTTP and the address bar; the socket follows them.
  document.addEventListener("htmx:pushedIntoHistory", () => send({ type: "view", query: location.search }));
  window.addEventListener("popstate", () => send({ type: "view", query: location.search }));
  setInterval(() => send({ type: "sync" }), SYNC_EVERY_MS);
  document.addEventListener("visibilitychange", () => { if (!document.hidden) send({ type: "sync" }); });
  connect();
})();
