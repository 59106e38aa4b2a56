// Live panels: the socket only says "ticket N is at version V"; the page then
// fetches a fresh rendering over HTTP. A missed push or a reconnect is
// repaired the same way: the database is the truth, the push is a hint.
(function () {
  const root = document.getElementById("live-root");
  if (!root) return;
  const liveUrl = root.dataset.liveUrl;
  const wsPath = root.dataset.ws;
  let retry = 0;

  function currentVersion() {
    const live = document.getElementById("live");
    return live ? parseInt(live.dataset.version || "0", 10) : 0;
  }

  function refresh() {
    if (window.htmx) {
      htmx.ajax("GET", liveUrl, { target: "#live", swap: "outerHTML" });
    } else {
      fetch(liveUrl, { credentials: "same-origin" })
        .then((r) => r.text())
        .then((html) => { document.getElementById("live").outerHTML = html; });
    }
  }

  function connect() {
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    const ws = new WebSocket(scheme + location.host + wsPath);
    ws.onopen = () => { retry = 0; };
    ws.onmessage = (event) => {
      const msg = JSON.parse(event.data);
      if ((msg.type === "snapshot" || msg.type === "update") && msg.version > currentVersion()) refresh();
    };
    ws.onclose = (event) => {
      if (event.code === 4403) return; // not allowed: do not hammer the server
      retry = Math.min(retry + 1, 6);
      setTimeout(connect, 250 * 2 ** retry);
    };
  }
  connect();
})();
