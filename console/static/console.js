// The console's little JavaScript: keys, the saved-reply picker, and who
// else is at the ticket. Every page works without it.
"use strict";
(function () {
  const typing = (e) => e.target.closest("input, textarea, select, [contenteditable]");
  const rows = () => Array.from(document.querySelectorAll("table.queue tbody tr"));
  let at = -1;
  function select(i) {
    const list = rows();
    if (!list.length) return;
    at = Math.max(0, Math.min(list.length - 1, i));
    list.forEach((r, j) => r.classList.toggle("selected", j === at));
    list[at].scrollIntoView({ block: "nearest" });
    const link = list[at].querySelector("a");
    if (link) link.focus();
  }
  document.addEventListener("keydown", (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey || typing(e)) return;
    const keys = document.getElementById("keys");
    switch (e.key) {
      case "j": select(at + 1); break;
      case "k": select(at - 1); break;
      case "Enter": {
        const r = rows()[at];
        if (r && r.dataset.href) location.href = r.dataset.href;
        else return;
        break;
      }
      case "r": { const t = document.getElementById("reply"); if (!t) return; t.focus(); break; }
      case "n": { const t = document.getElementById("note"); if (!t) return; t.focus(); break; }
      case "?": if (keys && keys.showModal) keys.showModal(); break;
      default: return;
    }
    e.preventDefault();
  });

  // A saved reply goes into the reply box here, without a page load.
  const savedForm = document.getElementById("saved-form");
  const reply = document.getElementById("reply");
  if (savedForm && reply) {
    savedForm.addEventListener("submit", (e) => {
      const opt = savedForm.querySelector("select").selectedOptions[0];
      if (!opt) return;
      e.preventDefault();
      const start = reply.selectionStart ?? reply.value.length;
      reply.value = reply.value.slice(0, start) + opt.dataset.body + reply.value.slice(reply.selectionEnd ?? start);
      reply.focus();
    });
  }

  // Who else views or answers this ticket, every few seconds.
  const ticket = document.querySelector("[data-ticket]");
  const line = document.getElementById("presence");
  if (ticket && line) {
    let activity = "viewing";
    if (reply) reply.addEventListener("input", () => { activity = "replying"; });
    const url = "/ui/tickets/" + encodeURIComponent(ticket.dataset.ticket) + "/presence";
    const beat = () => {
      fetch(url, { method: "POST", body: new URLSearchParams({ activity }), credentials: "same-origin" })
        .then((r) => (r.ok ? r.text() : line.textContent))
        .then((t) => { line.textContent = t; })
        .catch(() => {});
    };
    setInterval(beat, 5000);
    beat();
  }
})();
