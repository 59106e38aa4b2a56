// The agent's reply as it is written (websocket messages of type "reply_stream", beside the
// panel frames): "typing" before the first token, then the provisional text so far, then
// "done" once the step has committed. The provisional reply sits just after the conversation
// panel, never inside it, and goes away when the stored turn it announced is on the page
// (or at once when no reply was stored: a held reply, a tool call, an error). It is never
// kept: a reload shows only stored turns.
(function () {
  "use strict";
  const GRACE_MS = 8000;  // after "done", how long to wait for the frame that brings the stored turn
  let current = null;  // { stream, seq, turn }
  let typingWasHidden = null;  // the page's own "Support is typing…" line, put back as it was

  function box() {
    let el = document.getElementById("reply-stream");
    if (el) return el;
    const panel = document.getElementById("panel-conversation");
    if (!panel) return null;
    el = document.createElement("div");
    el.id = "reply-stream";
    el.className = "reply-stream";
    el.hidden = true;
    el.setAttribute("aria-live", "polite");
    const article = document.createElement("article");
    article.className = "turn agent provisional";
    const header = document.createElement("header");
    const who = document.createElement("span");
    who.className = "who ai";
    who.textContent = "Sundry assistant";
    const state = document.createElement("span");
    state.className = "muted stream-state";
    header.append(who, " ", state);
    const text = document.createElement("p");
    text.className = "text stream-text";
    article.append(header, text);
    el.append(article);
    panel.insertAdjacentElement("afterend", el);
    return el;
  }
  function show(state, text) {
    const el = box();
    if (!el) return;
    const typing = document.getElementById("typing");
    if (typing && typingWasHidden === null) { typingWasHidden = typing.hidden; typing.hidden = true; }
    el.dataset.state = state;
    el.querySelector(".stream-state").textContent = state === "typing" ? "is writing…" : "writing (not yet sent)";
    el.querySelector(".stream-text").textContent = text;
    el.classList.toggle("is-typing", state === "typing");
    el.hidden = false;
  }
  function hide(posted) {
    const el = document.getElementById("reply-stream");
    if (el) { el.hidden = true; el.dataset.state = "done"; el.querySelector(".stream-text").textContent = ""; }
    const typing = document.getElementById("typing");
    if (typing && typingWasHidden !== null && !posted) typing.hidden = typingWasHidden;
    typingWasHidden = null;
    current = null;
  }
  function storedOnPage(turn) {
    return !!(document.getElementById("msg-" + turn) || document.getElementById("turn-" + turn));
  }

  document.addEventListener("htmx:wsBeforeMessage", (e) => {
    const raw = e.detail.message;
    if (typeof raw !== "string" || raw.charAt(0) !== "{") return;
    let m;
    try { m = JSON.parse(raw); } catch (_) { return; }
    e.preventDefault();  // not a panel frame
    if (!m || m.type !== "reply_stream") return;
    if (current && current.stream === m.stream && m.seq <= current.seq) return;  // older news
    if (m.state === "done") {
      if (m.turn === null || m.turn === undefined || storedOnPage(m.turn)) { hide(m.turn != null); return; }
      current = { stream: m.stream, seq: m.seq, turn: m.turn };
      const waiting = current;
      setTimeout(() => { if (current === waiting) hide(true); }, GRACE_MS);
      return;
    }
    current = { stream: m.stream, seq: m.seq, turn: null };
    show(m.state, m.state === "text" ? m.text : "");
  });
  // The frame that brings the stored reply takes the provisional one's place.
  document.addEventListener("sundry:frame", () => {
    if (current && current.turn != null && storedOnPage(current.turn)) hide(true);
  });
})();
