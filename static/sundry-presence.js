// Typing news from the desk's reply box over the ticket's socket (sundry/live/presence.py):
// "on" when keys come (repeated every 2 s while they do), "off" after 4 s without a key, when
// the box empties or loses focus, or when its message was sent. Colleagues see "ann is typing…";
// the customer sees "Support is typing…" when the person typing holds the ticket.
(function () {
  "use strict";
  const REPEAT_MS = 2000;
  const IDLE_MS = 4000;
  let socket = null;
  let sentAt = 0;
  let idle = null;

  document.addEventListener("htmx:wsOpen", (e) => { socket = e.detail.socketWrapper; sentAt = 0; });
  document.addEventListener("htmx:wsClose", () => {
    socket = null;
    sentAt = 0;
    // Who is here is unknown while the socket is down; the next connection says it again.
    ["presence", "staff-typing"].forEach((id) => { const el = document.getElementById(id); if (el) el.hidden = true; });
  });
  const box = document.getElementById("composer-text");
  if (!box) return;
  function send(on) {
    if (socket) socket.send(JSON.stringify({ type: "typing", on: on }));
  }
  function stop() {
    clearTimeout(idle);
    if (sentAt) { send(false); sentAt = 0; }
  }
  box.addEventListener("input", () => {
    if (!box.value.trim()) { stop(); return; }
    const now = Date.now();
    if (now - sentAt >= REPEAT_MS) { send(true); sentAt = now; }
    clearTimeout(idle);
    idle = setTimeout(stop, IDLE_MS);
  });
  box.addEventListener("blur", stop);
  document.addEventListener("htmx:afterRequest", (e) => { if (e.detail.elt === box.form) stop(); });
})();
