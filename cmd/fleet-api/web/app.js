// The fleet dashboard: lists GET /clusters and GET /releases, then follows GET /watch/clusters and
// GET /watch/releases, as the user whose token it holds. Everything shown was written by others (names, messages, errors), so it is put
// in the page as text, never as markup.
"use strict";

const tokenKey = "fleet-api-token";
const rows = new Map(); // "namespace/name" -> summary
const releases = new Map(); // "namespace/name" -> chart release
let releasesNotPermitted = {}; // cluster set -> why the caller may not list its Releases
let generation = 0; // a newer connection makes older ones stop

const $ = (id) => document.getElementById(id);

function showLogin(message) {
  generation++;
  $("login").hidden = false;
  $("clusters").hidden = true;
  $("empty").hidden = true;
  $("releases").hidden = true;
  $("releases-title").hidden = true;
  $("logout").hidden = true;
  $("login-error").textContent = message || "";
  setLive("not connected");
}

function setLive(text) {
  $("live").textContent = text;
}

async function api(path, signal) {
  const token = sessionStorage.getItem(tokenKey);
  return fetch(path, { headers: { Authorization: "Bearer " + token }, signal, cache: "no-store" });
}

// counts is "R of T ready", or "unknown" and why when the member's caches have no count: an
// unknown count is never shown as zero.
function counts(label, what, ready, total) {
  // A kind the member's account may not list is a settled answer, said once, with what would
  // permit it: not a cache forever syncing.
  if (what.notPermitted) return cell(label, "not permitted", what.notPermitted, "unknown");
  if (what.unknown) return cell(label, "unknown", what.unknown, "unknown");
  return cell(label, ready + " of " + total + " ready");
}

function cell(label, text, sub, cls) {
  const td = document.createElement("td");
  td.dataset.label = label;
  const main = document.createElement("span");
  main.textContent = text;
  if (cls) main.className = cls;
  td.append(main);
  if (sub) {
    const s = document.createElement("span");
    s.className = "sub";
    s.textContent = sub;
    td.append(s);
  }
  return td;
}

function time(s) {
  const d = new Date(s);
  return isNaN(d) || d.getFullYear() < 2 ? "" : d.toLocaleString();
}

function render() {
  const body = $("clusters").querySelector("tbody");
  const keys = [...rows.keys()].sort((a, b) => {
    const ra = rows.get(a).ready === "True", rb = rows.get(b).ready === "True";
    return ra === rb ? a.localeCompare(b) : ra ? 1 : -1; // not ready first, as clusterregistry get
  });
  const trs = keys.map((key) => {
    const c = rows.get(key);
    const tr = document.createElement("tr");
    tr.dataset.member = key;
    tr.append(
      cell("Member", c.displayName || c.name, key),
      cell("Ready", c.ready + (c.reason ? " (" + c.reason + ")" : ""), c.ready === "True" ? "" : c.message, "ready-" + c.ready),
      cell("Version", c.version || "-"),
      counts("Nodes", c.nodes, c.nodes.ready, c.nodes.total),
      counts("Pods", c.pods || {}, (c.pods || {}).ready, (c.pods || {}).total),
      counts("Deployments", c.workloads, c.workloads.deploymentsReady, c.workloads.deployments),
      cell("Capacity", c.capacity ? "cpu " + c.capacity.cpu + ", memory " + c.capacity.memory : "-",
        c.capacity ? c.capacity.readyNodes + " of " + c.capacity.nodes + " Nodes schedulable" : "not observed (the capacity controller writes it)"),
      cell("Caches", c.cache.state + (time(c.cache.since) ? " since " + time(c.cache.since) : ""), c.cache.error, "cache cache-" + c.cache.state),
      cell("Credentials expire", c.credentialsExpireAt ? time(c.credentialsExpireAt) : "-"),
    );
    return tr;
  });
  body.replaceChildren(...trs);
  $("clusters").hidden = trs.length === 0;
  $("empty").hidden = trs.length !== 0;
}

function key(c) {
  return c.namespace + "/" + c.name;
}

// source is what a release delivers, and from where: a chart (the version delivered; as asked,
// with its mode), manifests inline, or a ConfigMap's.
function source(r) {
  if (r.source === "Manifests") return [r.manifests + (r.manifests === 1 ? " manifest" : " manifests"), "inline"];
  if (r.source === "ConfigMap") return ["manifests", "ConfigMap " + r.configMap];
  const c = r.chart || {};
  const asked = c.configMap ? "ConfigMap " + c.configMap : c.secret ? "Secret " + c.secret : (c.chart ? c.chart + " from " : "") + c.url;
  const delivered = r.delivered ? r.delivered.name + " " + r.delivered.version : "chart not delivered yet";
  return [delivered, asked + (c.version ? " " + c.version : "") + ", " + (c.mode || "Render") + " mode"];
}

// conditionBadges shows a release's conditions so that each reads as what it says: a good one
// (Available True) in green with a tick, a bad one (Available False, Stalled or Degraded True)
// in red with a cross, the rest plain; the status word is always written, colour is never the
// only sign.
function conditionBadges(conditions) {
  const td = cell("Status", "");
  td.replaceChildren(...conditions.map((c) => {
    const good = c.type === "Available" && c.status === "True";
    const bad = (c.type === "Available" && c.status !== "True") || ((c.type === "Stalled" || c.type === "Degraded") && c.status === "True");
    const b = document.createElement("span");
    b.className = "cond " + (good ? "cond-good" : bad ? "cond-bad" : "cond-info");
    b.dataset.condition = c.type;
    b.textContent = (good ? "\u2713 " : bad ? "\u2717 " : "") + c.type + ": " + c.status + (c.reason ? " (" + c.reason + ")" : "");
    if (c.message) b.title = c.message;
    const line = document.createElement("span");
    line.className = "cond-line";
    line.append(b);
    if (bad && c.message) {
      const m = document.createElement("span");
      m.className = "sub";
      m.textContent = c.message;
      line.append(m);
    }
    return line;
  }));
  if (!conditions.length) td.textContent = "-";
  return td;
}

// renderReleases shows each release: what it delivers, how many members are ready, its
// conditions, and each member's phase and revision, with what spec.feedback read there; under
// it, its rollout (rollout.js).
function renderReleases() {
  const body = $("releases").querySelector("tbody");
  const trs = [...releases.keys()].sort().flatMap((k) => {
    const r = releases.get(k);
    const tr = document.createElement("tr");
    tr.dataset.release = k;
    const [delivers, from] = source(r);
    const members = cell("Members", "");
    members.replaceChildren(...r.perMember.map((m) => {
      const line = document.createElement("span");
      line.className = "member phase-" + m.phase;
      const fed = Object.keys(m.feedback || {}).sort().map((name) => name + "=" + m.feedback[name]);
      line.textContent = m.cluster + ": " + m.phase + (m.revision ? " at " + m.revision : "") + (m.reason ? " (" + m.reason + ")" : "") + (m.message ? " " + m.message : "") + (fed.length ? " \u00b7 " + fed.join(", ") : "");
      return line;
    }));
    tr.append(
      cell("Release", r.name, r.namespace + ", placement " + r.placement),
      cell("Delivers", delivers, from),
      cell("Ready", r.ready + " of " + r.members),
      conditionBadges(r.conditions || []),
      members,
    );
    return [tr, rolloutRow(k)];
  });
  body.replaceChildren(...trs);
  const denied = Object.keys(releasesNotPermitted).sort().map((ns) => {
    const p = document.createElement("p");
    p.className = "not-permitted";
    p.dataset.namespace = ns;
    p.textContent = "You may not list the Releases of cluster set " + ns + ": " + releasesNotPermitted[ns];
    return p;
  });
  $("releases-denied").replaceChildren(...denied);
  $("releases").hidden = releases.size === 0;
  $("releases-title").hidden = releases.size === 0 && denied.length === 0;
}

// follow lists one route, then watches from the list's revision; it lists again when the
// revision is no longer kept, and reconnects after a break. what names the route and the event's
// field ("clusters", "cluster"); store and draw keep and show them.
async function follow(mine, list, watch, items, item, store, draw) {
  let rev = "";
  while (mine === generation) {
    try {
      if (rev === "") {
        const resp = await api(list);
        if (resp.status === 401) {
          sessionStorage.removeItem(tokenKey);
          showLogin("The registry does not accept that token.");
          return;
        }
        if (!resp.ok) throw new Error("GET " + list + ": " + resp.status);
        const listed = await resp.json();
        store.clear();
        for (const c of listed[items]) store.set(key(c), c);
        if (items === "releases") releasesNotPermitted = listed.notPermitted || {};
        rev = listed.resourceVersion;
        if (items === "releases") for (const k of store.keys()) rolloutChanged(k);
        $("login").hidden = true;
        $("logout").hidden = false;
        draw();
      }
      const resp = await api(watch + "?resourceVersion=" + encodeURIComponent(rev));
      if (resp.status === 410) { rev = ""; continue; }
      if (resp.status === 401) { showLogin("Your token is no longer accepted."); return; }
      if (!resp.ok || !resp.body) throw new Error("GET " + watch + ": " + resp.status);
      setLive("live");
      const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffered = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done || mine !== generation) break;
        buffered += value;
        let nl;
        while ((nl = buffered.indexOf("\n")) >= 0) {
          const line = buffered.slice(0, nl);
          buffered = buffered.slice(nl + 1);
          if (!line.trim()) continue;
          const e = JSON.parse(line);
          if (e.type === "ERROR") { rev = ""; break; }
          rev = e.resourceVersion || rev;
          if (e.type === "ADDED" || e.type === "MODIFIED") store.set(key(e[item]), e[item]);
          if (e.type === "DELETED") store.delete(key(e[item]));
          if (item === "release" && e.type !== "BOOKMARK") rolloutChanged(key(e[item]));
          if (e.type !== "BOOKMARK") draw();
        }
      }
    } catch (err) {
      setLive("reconnecting: " + err.message);
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
}

// followAll follows the members and the releases, until a newer connection or a logout.
function followAll() {
  const mine = ++generation;
  follow(mine, "/clusters", "/watch/clusters", "clusters", "cluster", rows, render);
  follow(mine, "/releases", "/watch/releases", "releases", "release", releases, renderReleases);
}

document.addEventListener("DOMContentLoaded", () => {
  $("confirm-ok").addEventListener("click", () => $("confirm").close("ok"));
  $("confirm-cancel").addEventListener("click", () => $("confirm").close("cancel"));
  $("login").addEventListener("submit", (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(tokenKey, $("token").value.trim());
    $("token").value = "";
    followAll();
  });
  $("logout").addEventListener("click", () => {
    sessionStorage.removeItem(tokenKey);
    rows.clear();
    releases.clear();
    rollouts.clear();
    releasesNotPermitted = {};
    // Nothing the last user saw stays in the page for the next.
    render();
    renderReleases();
    showLogin("");
  });
  if (sessionStorage.getItem(tokenKey)) followAll();
  else showLogin("");
});
