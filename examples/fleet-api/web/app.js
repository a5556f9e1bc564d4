// The fleet dashboard: lists GET /clusters, then follows GET /watch/clusters, as the user whose
// token it holds. Everything shown was written by others (names, messages, errors), so it is put
// in the page as text, never as markup.
"use strict";

const tokenKey = "fleet-api-token";
const rows = new Map(); // "namespace/name" -> summary
let generation = 0; // a newer connection makes older ones stop

const $ = (id) => document.getElementById(id);

function showLogin(message) {
  generation++;
  $("login").hidden = false;
  $("clusters").hidden = true;
  $("empty").hidden = true;
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
      counts("Deployments", c.workloads, c.workloads.deploymentsReady, c.workloads.deployments),
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

// follow lists, then watches from the list's revision; it lists again when the revision is no
// longer kept, and reconnects after a break.
async function follow() {
  const mine = ++generation;
  let rev = "";
  while (mine === generation) {
    try {
      if (rev === "") {
        const resp = await api("/clusters");
        if (resp.status === 401) {
          sessionStorage.removeItem(tokenKey);
          showLogin("The registry does not accept that token.");
          return;
        }
        if (!resp.ok) throw new Error("GET /clusters: " + resp.status);
        const list = await resp.json();
        rows.clear();
        for (const c of list.clusters) rows.set(key(c), c);
        rev = list.resourceVersion;
        $("login").hidden = true;
        $("logout").hidden = false;
        render();
      }
      const resp = await api("/watch/clusters?resourceVersion=" + encodeURIComponent(rev));
      if (resp.status === 410) { rev = ""; continue; }
      if (resp.status === 401) { showLogin("Your token is no longer accepted."); return; }
      if (!resp.ok || !resp.body) throw new Error("GET /watch/clusters: " + resp.status);
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
          if (e.type === "ADDED" || e.type === "MODIFIED") rows.set(key(e.cluster), e.cluster);
          if (e.type === "DELETED") rows.delete(key(e.cluster));
          if (e.type !== "BOOKMARK") render();
        }
      }
    } catch (err) {
      setLive("reconnecting: " + err.message);
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("login").addEventListener("submit", (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(tokenKey, $("token").value.trim());
    $("token").value = "";
    follow();
  });
  $("logout").addEventListener("click", () => {
    sessionStorage.removeItem(tokenKey);
    rows.clear();
    showLogin("");
  });
  if (sessionStorage.getItem(tokenKey)) follow();
  else showLogin("");
});
