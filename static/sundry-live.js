// Live panels over htmx's ws extension. The server renders every frame for
// this viewer from templates; a frame starts with a #live-version marker
// (version, the base version it applies on, snapshot or diff) followed by
// the panels whose rendering changed, swapped by id.
//
// Ordering and repair: a diff applies only on the version it was made from;
// otherwise the page asks for a full snapshot. A reconnect gets a snapshot
// from the server. Every 20 s the page tells the server its version, so a
// push the channel layer dropped is repaired even if no later push comes.
// A panel the person is editing (focus inside, an open edit <details>, or a
// request of theirs in flight) is not swapped under them; a snapshot is asked
// for once they leave it.
(function () {
  "use strict";
  const SYNC_EVERY_MS = 20000;
  let socket = null;
  let deferred = false;
  let inFrame = false;  // true while a pushed frame is being swapped (not an HTTP answer)

  function markerOf(html) {
    const m = /id="live-version"[^>]*data-version="(-?\d+)" data-base="(-?\d+)" data-kind="(\w+)"/.exec(html);
    return m ? { version: +m[1], base: +m[2], kind: m[3] } : null;
  }
  function pageVersion() {
    const el = document.getElementById("live-version");
    return el ? +el.dataset.version : -1;
  }
  function pageBase() {  // the version of the last frame applied (-1 before the first)
    const el = document.getElementById("live-version");
    return el && el.dataset.kind !== "page" ? +el.dataset.version : null;
  }
  function status(text, state) {
    const el = document.getElementById("live-status");
    if (el) { el.textContent = text; el.dataset.state = state; }
  }
  function send(message) {
    if (socket) socket.send(JSON.stringify(message));
  }
  function busy(panel) {
    if (!panel) return false;
    // A request sent from inside the panel is in flight: swapping the panel now
    // would detach the element whose answer (flash, out-of-band panels) is coming.
    if (panel.querySelector(".htmx-request") || panel.classList.contains("htmx-request")) return true;
    const active = document.activeElement;
    if (active && active !== document.body && panel.contains(active) && active.matches("input, textarea, select")) return true;
    return !!panel.querySelector("details[data-edit][open]");
  }
  function nearBottom() {
    return window.innerHeight + window.scrollY >= document.body.scrollHeight - 120;
  }

  document.addEventListener("htmx:wsOpen", (e) => {
    socket = e.detail.socketWrapper;
    status("Live", "live");
  });
  // While the socket is open, a request says so: the server may then leave out of its answer
  // what the socket's push brings anyway (a customer's own message, sundry/portal/views.py).
  document.addEventListener("htmx:configRequest", (e) => {
    if (socket) e.detail.headers["X-Sundry-Live"] = "1";
  });
  document.addEventListener("htmx:wsClose", (e) => {
    const code = e.detail.event && e.detail.event.code;
    socket = null;
    if (code === 4401) status("You signed out; live updates stopped.", "off");
    else if (code === 4403) status("Live updates are not available for this page.", "off");
    else if (code === 4429) status("Too many live pages open: close some and reload this one.", "off");
    else if (code === 1013) status("The server is busy; reconnecting shortly…", "retry");
    else status("Reconnecting…", "retry");
  });

  document.addEventListener("htmx:wsBeforeMessage", (e) => {
    const marker = markerOf(e.detail.message);
    if (!marker) { e.preventDefault(); return; }
    const base = pageBase();
    if (marker.kind === "diff" && base !== null && marker.base !== base) {
      e.preventDefault();  // a gap: this diff was made on a version we do not hold
      send({ type: "resync" });
      return;
    }
    window.__sundryStick = nearBottom();
    inFrame = true;
  });
  document.addEventListener("htmx:oobBeforeSwap", (e) => {
    const target = e.detail.target;
    if (inFrame && target && target.id && target.id.startsWith("panel-") && busy(target)) {
      e.detail.shouldSwap = false;
      deferred = true;
      target.classList.add("stale");
      return;
    }
    // An appended item the page already holds (the HTTP answer to the sender's own post
    // re-rendered the list first) is not added twice: an item id appears once.
    const fragment = e.detail.fragment;
    if (fragment && target && target.id && target.id.startsWith("panel-")) {
      Array.from(fragment.children || []).forEach((item) => {
        if (item.id && item.id !== target.id && document.getElementById(item.id)) item.remove();
      });
    }
  });
  document.addEventListener("htmx:wsAfterMessage", () => {
    inFrame = false;
    if (window.__sundryStick) window.scrollTo(0, document.body.scrollHeight);
    document.dispatchEvent(new CustomEvent("sundry:frame", { detail: { version: pageVersion() } }));
  });

  // Leaving an edit that a push skipped: catch up with one snapshot.
  function maybeCatchUp() {
    if (!deferred) return;
    setTimeout(() => {
      const stale = document.querySelector(".stale");
      if (stale && busy(stale)) return;
      deferred = false;
      send({ type: "resync" });
    }, 50);
  }
  document.addEventListener("focusout", maybeCatchUp);
  document.addEventListener("toggle", maybeCatchUp, true);
  document.addEventListener("htmx:afterRequest", maybeCatchUp);

  setInterval(() => send({ type: "sync", version: pageVersion() }), SYNC_EVERY_MS);
  document.addEventListener("visibilitychange", () => {
    if (!document.hidden) send({ type: "sync", version: pageVersion() });
  });

  // A composer whose message was accepted (200) empties itself for the next one; a
  // refusal (422) keeps the text so it can be fixed. Done here because htmx's hx-on
  // attributes need eval, which the page's htmx config turns off.
  document.addEventListener("htmx:afterRequest", (e) => {
    const form = e.detail.elt;
    if (form instanceof HTMLFormElement && form.hasAttribute("data-reset-on-success") &&
        e.detail.successful && e.detail.xhr.status === 200) {
      form.reset();
      renewClientKey(form);
    }
  });
  // A message's key stays with it until the server has answered that it is stored, so a
  // resend after a lost answer is recognised and stored once; the next message gets a new key.
  function renewClientKey(form) {
    const input = form.querySelector("input[data-client-key]");
    if (!input) return;
    if (window.crypto && crypto.randomUUID) {
      input.value = crypto.randomUUID().replace(/-/g, "");
    } else {
      const bytes = new Uint8Array(16);
      crypto.getRandomValues(bytes);
      input.value = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
    }
  }

  // A request that failed says so next to the form that sent it, and the page's older
  // flash (about an earlier request) goes. A composer keeps its text; if the session
  // ended (401), the text is also kept across signing in again and put back here.
  const DRAFTS = "sundry:drafts";
  function errorBox(form) {
    let box = form.querySelector(".form-error");
    if (!box) {
      box = document.createElement("div");
      box.className = "form-error";
      box.setAttribute("role", "alert");
      form.appendChild(box);
    }
    return box;
  }
  function saveDrafts() {
    const drafts = {};
    document.querySelectorAll("form[data-reset-on-success] textarea[name]").forEach((t) => {
      if (t.value.trim()) drafts[t.form.getAttribute("hx-post") + "|" + t.name] = t.value;
    });
    sessionStorage.setItem(DRAFTS, JSON.stringify({ page: location.pathname, drafts }));
  }
  function restoreDrafts() {
    let saved = null;
    try { saved = JSON.parse(sessionStorage.getItem(DRAFTS) || "null"); } catch (_) { saved = null; }
    if (!saved || saved.page !== location.pathname) return;
    sessionStorage.removeItem(DRAFTS);
    document.querySelectorAll("form[data-reset-on-success] textarea[name]").forEach((t) => {
      const text = saved.drafts[t.form.getAttribute("hx-post") + "|" + t.name];
      if (text && !t.value) {
        t.value = text;
        errorBox(t.form).textContent = "Your unsent message is back in the box: press Send when ready.";
      }
    });
  }
  document.addEventListener("DOMContentLoaded", restoreDrafts);
  document.addEventListener("htmx:responseError", (e) => {
    const form = e.detail.elt instanceof HTMLFormElement ? e.detail.elt : e.detail.elt.closest("form");
    const flash = document.getElementById("flash");
    if (flash) flash.innerHTML = "";
    if (!form) return;
    const xhr = e.detail.xhr;
    const box = errorBox(form);
    box.textContent = "";
    if (xhr.status === 401) {
      saveDrafts();
      box.append(xhr.responseText + " ");
      const link = document.createElement("a");
      link.href = "/login/?next=" + encodeURIComponent(location.pathname);
      link.textContent = "Sign in again";
      box.append(link);
    } else if (xhr.status === 403) {
      box.textContent = "This was refused (the page may be out of date). Reload the page and try again — copy your text first.";
    } else if (xhr.status === 429) {
      box.textContent = "Too many requests just now. Wait a moment and try again.";
    } else {
      box.textContent = "Something went wrong (" + xhr.status + "). Your text is kept: try again in a moment.";
    }
  });
  document.addEventListener("htmx:sendError", (e) => {
    const form = e.detail.elt instanceof HTMLFormElement ? e.detail.elt : e.detail.elt.closest("form");
    if (form) errorBox(form).textContent = "Could not reach Sundry. Your text is kept: try again when you are back online.";
  });
  document.addEventListener("htmx:afterRequest", (e) => {  // a later success clears the form's old error
    const form = e.detail.elt;
    if (form instanceof HTMLFormElement && e.detail.successful) {
      const box = form.querySelector(".form-error");
      if (box) box.remove();
    }
  });

  // "Support is typing…" from the moment a customer's message is accepted on a ticket the
  // agent works until a reply (from the agent or a person) arrives, or two minutes pass.
  const TYPING_MAX_MS = 120000;
  let typingSince = null;
  function replies() {
    return document.querySelectorAll("#panel-conversation .turn.agent, #panel-conversation .turn.staff").length;
  }
  function typing(on, before) {
    const el = document.getElementById("typing");
    if (!el) return;
    // A reply counted since the message was sent has answered it already: on a busy server the
    // reply's frame can arrive before the answer to the post itself.
    const answered = on && before !== undefined && replies() > before;
    el.hidden = !on || answered;
    typingSince = on && !answered ? { at: Date.now(), replies: before === undefined ? replies() : before } : null;
  }
  const sentWith = new WeakMap();  // a post's xhr → the replies on the page when it was sent
  document.addEventListener("htmx:beforeRequest", (e) => {
    if (e.detail.elt instanceof HTMLFormElement && e.detail.elt.hasAttribute("data-awaits-reply")) {
      sentWith.set(e.detail.xhr, replies());
    }
  });
  document.addEventListener("htmx:afterRequest", (e) => {
    const form = e.detail.elt;
    if (form instanceof HTMLFormElement && form.hasAttribute("data-awaits-reply") &&
        e.detail.successful && e.detail.xhr.status === 200) typing(true, sentWith.get(e.detail.xhr));
  });
  document.addEventListener("sundry:frame", () => {
    if (typingSince && replies() > typingSince.replies) typing(false);
  });
  setInterval(() => {
    if (typingSince && Date.now() - typingSince.at > TYPING_MAX_MS) typing(false);
  }, 5000);

  // A composer's refusal (409, 422, 503 answer with a reason in the flash) is said next to the
  // composer, where the text is, not at the top of the page. Runs after the handler above.
  document.addEventListener("htmx:afterRequest", (e) => {
    const form = e.detail.elt;
    const status = e.detail.xhr && e.detail.xhr.status;
    if (!(form instanceof HTMLFormElement) || !form.hasAttribute("data-reset-on-success") ||
        ![409, 422, 503].includes(status)) return;
    const flash = document.getElementById("flash");
    const text = flash ? flash.textContent.trim() : "";
    if (!text) return;
    errorBox(form).textContent = text;
    flash.innerHTML = "";
  });
  // A decision in the approvals panel (approve, reject, confirm for the customer) takes away the
  // button that was pressed, and its outcome lands in the flash at the top of the page — off-screen
  // on a long ticket. Focus moves to the outcome: that brings it into view and a screen reader reads
  // it (a live region swapped in whole is often not announced). The request is known by its xhr: by
  // the time it is answered, the form that sent it has gone with the old panel.
  const decisions = new WeakSet();
  document.addEventListener("htmx:beforeRequest", (e) => {
    if (e.detail.elt instanceof Element && e.detail.elt.closest("#panel-held")) decisions.add(e.detail.xhr);
  });
  document.addEventListener("htmx:afterRequest", (e) => {
    const flash = document.getElementById("flash");
    if (!decisions.has(e.detail.xhr) || !flash || !flash.textContent.trim()) return;
    decisions.delete(e.detail.xhr);
    flash.setAttribute("tabindex", "-1");
    flash.focus({ preventScroll: true });
    flash.scrollIntoView({ block: "center" });
  });
  // A long conversation opens at its latest message on the customer's page too, and on the desk
  // when it holds only the latest turns (a "Show earlier" link above them).
  document.addEventListener("DOMContentLoaded", () => {
    const turns = document.querySelectorAll(".customer-page #panel-conversation .turn, " +
                                            "#panel-conversation:has(> [data-earlier-control]) .turn");
    if (turns.length) turns[turns.length - 1].scrollIntoView({ block: "end" });
    watchEarlier();
  });

  // Earlier items of a conversation that opened at its latest ones (sundry.live.earlier): fetched
  // when the "Show earlier" link comes into view or is pressed, put above the first item on the
  // page without moving what the reader is looking at. Without JavaScript the link opens a page.
  let loadingEarlier = false;
  const watched = new WeakSet();
  const sight = "IntersectionObserver" in window ? new IntersectionObserver((entries) => {
    entries.forEach((entry) => { if (entry.isIntersecting) loadEarlier(entry.target); });
  }) : null;
  function itemNumber(el) {
    const m = el && /-(\d+)$/.exec(el.id || "");
    return m ? +m[1] : null;
  }
  function firstItem(panel) {
    return panel.querySelector(":scope > .turn-item");
  }
  function watchEarlier() {
    document.querySelectorAll("#panel-conversation a[data-earlier]").forEach((link) => {
      if (watched.has(link)) return;
      watched.add(link);
      if (sight) sight.observe(link);
    });
  }
  function inView(el) {
    const box = el.getBoundingClientRect();
    return box.bottom > 0 && box.top < window.innerHeight;
  }
  async function loadEarlier(link) {
    const panel = link.closest("#panel-conversation");
    const control = link.closest("[data-earlier-control]");
    const before = panel && itemNumber(firstItem(panel));
    if (loadingEarlier || !control || before === null) return;
    loadingEarlier = true;
    try {
      const answer = await fetch(link.dataset.earlier + "?before=" + before,
                                 { headers: { "X-Sundry-Fragment": "1" }, credentials: "same-origin" });
      if (!answer.ok || !control.isConnected || itemNumber(firstItem(panel)) !== before) return;
      const holder = document.createElement("template");
      holder.innerHTML = await answer.text();
      // An item the page already holds (a frame brought it meanwhile) is not added twice.
      Array.from(holder.content.children).forEach((item) => {
        if (item.id && document.getElementById(item.id)) item.remove();
      });
      const added = Array.from(holder.content.children);
      const height = document.documentElement.scrollHeight;
      control.after(holder.content);
      window.scrollBy(0, document.documentElement.scrollHeight - height);  // the reader's place stays put
      added.forEach((item) => { if (window.htmx) htmx.process(item); });
      if (answer.headers.get("X-Sundry-Earlier") !== "1") control.remove();
    } finally {
      loadingEarlier = false;
    }
    if (link.isConnected && inView(link)) loadEarlier(link);  // still in sight: the screen is taller
  }
  document.addEventListener("click", (e) => {
    const link = e.target.closest("#panel-conversation a[data-earlier]");
    if (!link) return;
    e.preventDefault();
    loadEarlier(link);
  });
  // A whole conversation panel swapped in (a snapshot after a reconnect or a gap) holds the latest
  // items only: the earlier ones the reader fetched stay, above them.
  let keptEarlier = null;
  document.addEventListener("htmx:oobBeforeSwap", (e) => {
    const target = e.detail.target;
    const fragment = e.detail.fragment;
    if (!target || target.id !== "panel-conversation" || !e.detail.shouldSwap || !fragment) return;
    const incoming = fragment.id === target.id ? fragment
      : (fragment.querySelector ? fragment.querySelector("#panel-conversation") : null);
    if (!incoming) return;  // items appended or replaced, not the panel
    const first = itemNumber(incoming.querySelector(".turn-item"));
    if (first === null) return;
    keptEarlier = Array.from(target.querySelectorAll(":scope > .turn-item"))
      .filter((item) => itemNumber(item) !== null && itemNumber(item) < first);
  });
  document.addEventListener("htmx:oobAfterSwap", () => {
    if (keptEarlier && keptEarlier.length) {
      const panel = document.getElementById("panel-conversation");
      const first = panel && firstItem(panel);
      if (first) keptEarlier.forEach((item) => first.before(item));
    }
    keptEarlier = null;
    watchEarlier();
  });

  // "Close" on a detail pane empties the pane it names (no inline handlers: the page's
  // Content-Security-Policy allows scripts from our own files only).
  document.addEventListener("click", (e) => {
    const button = e.target.closest("[data-empty-closest]");
    if (!button) return;
    const pane = button.closest(button.getAttribute("data-empty-closest"));
    if (pane) pane.innerHTML = "";
  });

  // Keyboard: Ctrl/Cmd+Enter in a composer sends with its first button.
  document.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey) && e.target.matches(".composer textarea")) {
      e.preventDefault();
      const button = e.target.form.querySelector("button");
      if (button) button.click();
    }
  });
})();
