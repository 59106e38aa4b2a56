// Keyboard shortcuts for the desk. Single keys act only when no field has focus.
//   /  search        ?  this help           j / k  next / previous ticket in the queue
//   t  take over     a  go to the first approval (Enter then approves: nothing runs by a single key)
//   r  reply box     g  jump to the latest message
(function () {
  "use strict";
  function typing(target) {
    return target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName));
  }
  function rows() { return Array.from(document.querySelectorAll("table.queue tr[data-ticket]")); }
  function move(step) {
    const all = rows();
    if (!all.length) return;
    const at = all.findIndex((r) => r.classList.contains("selected"));
    const next = all[Math.min(all.length - 1, Math.max(0, at + step))] || all[0];
    all.forEach((r) => r.classList.remove("selected"));
    next.classList.add("selected");
    const link = next.querySelector("a");
    if (link) link.focus();
  }
  function latest(focus) {
    const turns = document.querySelectorAll("#panel-conversation .turn");
    const last = turns[turns.length - 1];
    if (!last) return;
    last.scrollIntoView({ block: "end" });
    if (focus) { last.setAttribute("tabindex", "-1"); last.focus({ preventScroll: true }); }
  }
  function help() {
    const dialog = document.getElementById("shortcuts");
    if (!dialog) return;
    if (dialog.open) dialog.close(); else dialog.showModal();
  }
  document.addEventListener("keydown", (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey || typing(e.target)) return;
    const click = (sel) => { const el = document.querySelector(sel); if (el) { e.preventDefault(); el.click(); } };
    const focus = (sel) => { const el = document.querySelector(sel); if (el) { e.preventDefault(); el.focus(); } };
    switch (e.key) {
      case "/": focus("#desk-search"); break;
      case "?": e.preventDefault(); help(); break;
      case "j": e.preventDefault(); move(1); break;
      case "k": e.preventDefault(); move(-1); break;
      case "t": click("button[data-shortcut='t']"); break;
      case "a": focus("#panel-held summary.button, #panel-held button[value='approve']"); break;
      case "r": focus("#composer-text"); break;
      case "g": e.preventDefault(); latest(true); break;
      default:
    }
  });
  document.addEventListener("click", (e) => {
    if (e.target.closest("[data-close-dialog]")) e.target.closest("dialog").close();
  });
  // A canned reply goes into the reply box, to be edited before sending.
  document.addEventListener("change", (e) => {
    const select = e.target.closest("select[data-macro-into]");
    if (!select || !select.value) return;
    const box = document.getElementById(select.getAttribute("data-macro-into"));
    if (box) {
      const start = box.value ? box.value.replace(/\s*$/, "\n\n").length : 0;
      box.value = box.value ? box.value.replace(/\s*$/, "\n\n") + select.value : select.value;
      box.focus();
      // A placeholder the ticket had no value for is a bracketed note: select the first, to type over.
      const note = /\[(fill in|unknown placeholder): [^\]]*\]/.exec(box.value.slice(start));
      if (note) box.setSelectionRange(start + note.index, start + note.index + note[0].length);
    }
    select.value = "";
  });
  // A long ticket opens at its latest message.
  document.addEventListener("DOMContentLoaded", () => {
    if (document.querySelector(".desk #panel-conversation .turn")) latest(false);
  });
})();
