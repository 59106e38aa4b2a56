// Browser notifications for staff: a ticket assigned to you needs attention (a flag raised, an
// action held for approval). The permission is asked only when you press the topbar's button;
// once granted, a socket (sundry/live/attention_feed.py) sends your flagged tickets whenever
// they change, and each reason not notified before raises one notification per ticket. What was
// notified is kept in this browser (by digest, not text), so a reload or a second tab does not
// repeat it.
(function () {
  "use strict";
  const button = document.getElementById("notify-toggle");
  if (!button || !("Notification" in window)) return;
  const STORE = "sundry-notified";
  const KEEP = 500;
  let socket = null;
  let retry = 1000;

  function known() {
    try { return JSON.parse(localStorage.getItem(STORE)) || []; } catch (_) { return []; }
  }
  function raise(tickets) {
    const kept = known();
    const seen = new Set(kept);
    tickets.forEach((t) => {
      const fresh = t.keys.filter((k) => !seen.has(k));
      if (!fresh.length) return;
      fresh.forEach((k) => { seen.add(k); kept.push(k); });
      const note = new Notification("Ticket #" + t.ticket + " needs attention",
                                    { body: t.causes.join(" · "), tag: "sundry-ticket-" + t.ticket });
      note.onclick = () => { window.focus(); location.assign(t.url); };
    });
    try { localStorage.setItem(STORE, JSON.stringify(kept.slice(-KEEP))); } catch (_) { /* full: notify again */ }
  }
  function connect() {
    if (socket || Notification.permission !== "granted") return;
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    socket = new WebSocket(scheme + location.host + button.dataset.attentionFeed);
    socket.onopen = () => { retry = 1000; };
    socket.onmessage = (e) => {
      let message = null;
      try { message = JSON.parse(e.data); } catch (_) { return; }
      if (message && message.type === "attention" && Array.isArray(message.tickets)) raise(message.tickets);
    };
    socket.onclose = (e) => {
      socket = null;
      if (e.code === 4401 || e.code === 4403 || e.code === 4429) return;  // signed out, not staff, too many pages
      setTimeout(connect, retry);
      retry = Math.min(retry * 2, 30000);
    };
  }
  function show() {
    button.hidden = Notification.permission !== "default";
    connect();
  }
  // A user gesture: browsers ask for the permission only from one.
  button.addEventListener("click", () => { Notification.requestPermission().then(show); });
  setInterval(() => { if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ type: "sync" })); }, 20000);
  show();
})();
