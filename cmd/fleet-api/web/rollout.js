// A release's rollout, under its row on the dashboard: its waves as a picture (each a segment,
// its members coloured and named by phase, the current one marked, its deadline as time left),
// its revisions by number, and the rollout verbs the caller may use, each confirmed first and
// sent as the caller (GET /releases/NS/NAME/rollout, POST /releases/NS/NAME/ACTION). Everything
// shown was written by others, so it is put in the page as text, never as markup.
"use strict";

const rollouts = new Map(); // "namespace/name" -> { view, row, pending, message }

// rolloutRow is the table row that holds release k's rollout, made once and kept across
// redraws of the releases table.
function rolloutRow(k) {
  let r = rollouts.get(k);
  if (!r) {
    const tr = document.createElement("tr");
    tr.className = "rollout-row";
    tr.dataset.rollout = k;
    const td = document.createElement("td");
    td.colSpan = 5;
    tr.append(td);
    r = { view: null, text: "", row: tr, pending: null, message: null };
    rollouts.set(k, r);
  }
  return r.row;
}

// rolloutChanged asks for release k's rollout again, soon: its events come in bursts (status,
// then a slice), and one answer serves them all.
function rolloutChanged(k) {
  rolloutRow(k);
  const r = rollouts.get(k);
  if (!releases.has(k)) {
    rollouts.delete(k);
    return;
  }
  if (r.pending) return;
  r.pending = setTimeout(() => loadRollout(k), 200);
}

async function loadRollout(k) {
  const r = rollouts.get(k);
  if (!r) return;
  r.pending = null;
  const [ns, name] = k.split("/");
  try {
    const resp = await api("/releases/" + encodeURIComponent(ns) + "/" + encodeURIComponent(name) + "/rollout");
    if (!resp.ok) {
      const st = await resp.json().catch(() => ({}));
      drawRolloutError(r, "Its rollout cannot be shown: " + (st.message || resp.status));
      return;
    }
    const text = await resp.text();
    // Redrawn only when it changed: a redraw replaces the buttons under the user's pointer.
    if (text === r.text) return;
    r.text = text;
    r.view = JSON.parse(text);
    drawRollout(r);
  } catch (err) {
    drawRolloutError(r, "Its rollout cannot be shown: " + err.message);
  }
}

function drawRolloutError(r, text) {
  const p = document.createElement("p");
  p.className = "error";
  p.textContent = text;
  r.row.firstChild.replaceChildren(p);
}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

// number is a revision's number by its hash, or its hash when the history does not name it.
function number(v, hash) {
  const rev = v.revisions.find((x) => x.hash === hash);
  return rev ? "revision " + rev.number : hash;
}

// drawRollout draws a rollout view: a line of where it stands, the waves, the revisions, and the
// buttons.
function drawRollout(r) {
  const v = r.view;
  const head = el("p", "rollout-head");
  const at = v.number ? "Revision " + v.number : v.revision ? "Revision " + v.revision : "Not rendered yet";
  head.append(el("strong", "", at));
  if (v.revision) head.title = "revision " + v.revision;
  const bits = [];
  if (v.waves.length && v.wave) bits.push("wave " + v.wave + " of " + v.waves.length);
  if (v.lastComplete) bits.push("last complete: revision " + v.lastComplete);
  if (v.paused) bits.push("paused");
  if (v.approval === "Manual") bits.push("approval: Manual, " + v.approved + " of " + v.waves.length + " waves approved");
  if (bits.length) head.append(" \u00b7 " + bits.join(" \u00b7 "));
  // What the user chose and opened stays chosen and open across a redraw.
  const chosen = r.row.querySelector("select[data-undo-to]")?.value;
  const open = r.row.querySelector("details.revisions")?.open;
  const parts = [head, drawWaves(v), drawRevisions(v), drawActions(r)];
  if (r.message) parts.push(r.message);
  r.row.firstChild.replaceChildren(...parts);
  const pick = r.row.querySelector("select[data-undo-to]");
  if (pick && chosen && [...pick.options].some((o) => o.value === chosen)) pick.value = chosen;
  if (open) r.row.querySelector("details.revisions").open = true;
  tick();
}

// drawWaves draws each wave as a segment, in order: its state in words (finished, current,
// awaiting approval, failed), and its members, each coloured and named with its phase.
function drawWaves(v) {
  const box = el("div", "waves");
  if (v.wavesUnknown) {
    box.append(el("p", "sub", v.wavesUnknown));
    return box;
  }
  for (const w of v.waves) {
    // A Failed member's revision is the one it still runs, not the one that failed there.
    const failed = w.members.some((m) => m.phase === "Failed");
    const ready = w.members.every((m) => m.phase === "Ready" && m.revision === v.revision);
    // A wave's state in words: what the picture's colours say, said again for whoever cannot
    // tell them apart.
    const awaiting = w.members.some((m) => m.reason === "AwaitingApproval");
    const state = failed ? "failed" : w.finished || (ready && w.started) ? "finished" : awaiting ? "awaiting approval"
      : w.current ? "rolling out" : w.started ? "started" : "waiting";
    const seg = el("div", "wave wave-" + state.replace(" ", "-") + (w.current ? " wave-current" : ""));
    seg.dataset.wave = String(w.wave);
    seg.dataset.state = state;
    const title = el("div", "wave-title", (w.current ? "\u25b6 " : "") + "Wave " + w.wave + ": " + state);
    if (w.started) title.title = "began " + time(w.started) + (w.finished ? ", ended " + time(w.finished) : "");
    seg.append(title);
    if (w.deadlineAt && !w.finished) {
      const left = el("div", "sub time-left");
      left.dataset.until = w.deadlineAt;
      left.dataset.label = "deadline";
      seg.append(left);
    }
    if (w.current && ready && v.soakSeconds && !w.finished) seg.append(el("div", "sub", "soaking: " + v.soakSeconds + " s after its last member became Ready"));
    const chips = el("div", "chips");
    for (const m of w.members) {
      const behind = m.revision && m.revision !== v.revision && m.phase !== "Failed";
      const chip = el("span", "chip phase-" + (behind ? "Behind" : m.phase), m.cluster + " " + m.phase + (behind ? " (runs " + number(v, m.revision) + ")" : ""));
      chip.dataset.member = m.cluster;
      chip.dataset.phase = m.phase;
      if (m.message) chip.title = m.message;
      chips.append(chip);
    }
    seg.append(chips);
    box.append(seg);
  }
  return box;
}

// drawRevisions lists the history by number, newest first: what each delivered, its change
// cause, when its waves ran; the hash on hover.
function drawRevisions(v) {
  const box = el("details", "revisions");
  box.append(el("summary", "", "Revisions (" + v.revisions.length + ")"));
  if (v.revisionsUnknown) box.append(el("p", "sub", v.revisionsUnknown));
  const ol = el("ol", "");
  for (const h of [...v.revisions].reverse()) {
    const marks = [h.current ? "current" : "", h.number === v.lastComplete ? "last complete" : ""].filter(Boolean);
    const waves = (h.waves || []).map((w) => "wave " + w.wave + " " + time(w.started) + (w.finished ? " \u2013 " + time(w.finished) : " \u2013 \u2026")).join("; ");
    const li = el("li", "", "Revision " + h.number + (marks.length ? " (" + marks.join(", ") + ")" : "") + ": " + h.summary +
      (h.changeCause ? " \u00b7 " + h.changeCause : "") + (waves ? " \u00b7 " + waves : ""));
    li.title = h.hash;
    li.dataset.revision = String(h.number);
    ol.append(li);
  }
  box.append(ol);
  return box;
}

// drawActions is a button for each verb the caller may use, and undo's choice of revision.
function drawActions(r) {
  const v = r.view, a = v.actions, box = el("div", "actions");
  const add = (action, label, body, confirmText) => {
    const b = el("button", "", label);
    b.type = "button";
    b.dataset.action = action;
    b.addEventListener("click", () => confirmAction(r, action, body(), confirmText()));
    box.append(b);
  };
  const next = v.waves.find((w) => w.members.some((m) => m.reason === "AwaitingApproval"));
  if (a.approve && next) {
    add("approve", "Approve wave " + next.wave, () => ({}), () => "Wave " + next.wave + " of " + (v.number ? "revision " + v.number : v.revision) +
      " may begin: " + next.members.map((m) => m.cluster).join(", ") + " will get it.");
  }
  if (a.pause) add("pause", "Pause", () => ({}), () => "Nothing will be applied to or removed from any member until it is resumed; what runs there stays.");
  if (a.resume) add("resume", "Resume", () => ({}), () => "The rollout goes on from wave " + v.wave + ".");
  if (a.restart) add("restart", "Restart", () => ({}), () => "Every member whose wave has begun gets its objects applied again now; changes made there by hand are put back.");
  const older = v.revisions.filter((h) => !h.current);
  if (a.undo && older.length) {
    const pick = el("select", "");
    pick.dataset.undoTo = "";
    pick.setAttribute("aria-label", "Revision to put back");
    for (const h of [...older].reverse()) {
      const o = el("option", "", "revision " + h.number + ": " + h.summary);
      o.value = String(h.number);
      pick.append(o);
    }
    box.append(pick);
    const current = v.revisions.find((h) => h.current);
    add("undo", "Undo to\u2026", () => ({ toRevision: Number(pick.value) }), () => {
      const to = older.find((h) => String(h.number) === pick.value);
      return "Revision " + to.number + " (" + to.summary + (to.changeCause ? ", " + to.changeCause : "") + ") will be put back" +
        (current ? " in place of revision " + current.number + " (" + current.summary + ")" : "") +
        ". It rolls out as a new revision, in waves, to every member the placement chooses.";
    });
  }
  if (!box.childElementCount) box.append(el("span", "sub", "You may look at this release; changing it is not yours to do."));
  return box;
}

// confirmAction asks the caller to confirm, saying what will change, then sends the verb as them.
function confirmAction(r, action, body, text) {
  const d = $("confirm");
  $("confirm-title").textContent = action[0].toUpperCase() + action.slice(1) + " " + r.view.namespace + "/" + r.view.name + "?";
  $("confirm-text").textContent = text;
  d.returnValue = "";
  d.onclose = async () => {
    if (d.returnValue !== "ok") return;
    const path = "/releases/" + encodeURIComponent(r.view.namespace) + "/" + encodeURIComponent(r.view.name) + "/" + action;
    const resp = await post(path, body);
    const answer = await resp.json().catch(() => ({}));
    r.message = el("p", resp.ok ? "done" : "error", answer.message || String(resp.status));
    r.message.setAttribute("role", "status");
    r.message.dataset.result = action;
    drawRollout(r);
    rolloutChanged(r.view.namespace + "/" + r.view.name);
  };
  d.showModal();
}

async function post(path, body) {
  const token = sessionStorage.getItem(tokenKey);
  return fetch(path, { method: "POST", headers: { Authorization: "Bearer " + token, "Content-Type": "application/json" }, body: JSON.stringify(body), cache: "no-store" });
}

// tick writes each deadline's time left; it runs every second.
function tick() {
  for (const e of document.querySelectorAll(".time-left")) {
    const left = Math.round((new Date(e.dataset.until) - Date.now()) / 1000);
    e.textContent = left > 0 ? e.dataset.label + " in " + (left >= 60 ? Math.floor(left / 60) + " min " : "") + (left % 60) + " s" : e.dataset.label + " passed";
  }
}
setInterval(tick, 1000);
