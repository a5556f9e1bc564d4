// The requests Optikon's UI (src/assets/js/app.js) makes, to the same URLs, with the same
// methods, form fields and JSON fields read: both lists every 500 ms, a chart posted as
// FormData (name, chartTar, namespace) with ?labels=, PUT to upgrade, DELETE with ?labels=. It
// sends no credentials of its own: the proxy in front of the API adds them. fetch stands where
// Optikon's jQuery was; the page also drops rows the API no longer lists, so a test can see a
// delete. Everything is put in the page as text.
"use strict";
const api = new URLSearchParams(location.search).get("api") + "/v0";
const $ = (id) => document.getElementById(id);

function row(table, id, cells) {
  let tr = document.getElementById(id);
  if (!tr) {
    tr = document.createElement("tr");
    tr.id = id;
    $(table).append(tr);
  }
  tr.replaceChildren(...cells.map(([cls, text]) => {
    const td = document.createElement("td");
    td.className = cls;
    td.textContent = text;
    return td;
  }));
  tr.dataset.seen = "1";
}

function sweep(table) {
  for (const tr of [...$(table).querySelectorAll("tr[id]")]) {
    if (tr.dataset.seen !== "1") tr.remove();
    tr.dataset.seen = "";
  }
}

async function updateClusterTable() {
  const resp = await fetch(api + "/clusters");
  if (!resp.ok) return;
  for (const c of await resp.json()) {
    row("clustable", c.metadata.name, [["name", c.metadata.name], ["labels", JSON.stringify(c.metadata.labels)],
      ["health", c.metadata.annotations.Health], ["pods", c.metadata.annotations.NumPods]]);
  }
  sweep("clustable");
}

async function updateReleasesTable() {
  const resp = await fetch(api + "/releases");
  if (!resp.ok) return;
  for (const r of await resp.json()) {
    row("releaseTable", r.Name + r.OnCluster, [["name", r.Name], ["version", String(r.Version)], ["chartName", r.Chart.Metadata.Name],
      ["chartVersion", r.Chart.Metadata.Version], ["cluster", r.OnCluster]]);
  }
  sweep("releaseTable");
}

function labelsQuery(id) {
  const labels = $(id).value;
  return labels !== "" ? "?labels=" + labels : "";
}

async function send(method, url, body) {
  const resp = await fetch(url, { method, body });
  const answer = await resp.json().catch(() => ({}));
  $("log").textContent = method + " " + resp.status + " " + (answer.message || "");
}

function form() {
  const data = new FormData();
  data.append("name", $("chartName").value);
  data.append("chartTar", $("chartLoc").files[0]);
  data.append("namespace", $("chartNamespace").value);
  return data;
}

document.addEventListener("DOMContentLoaded", () => {
  $("postRelease").addEventListener("click", () => send("POST", api + "/releases" + labelsQuery("chartLabels"), form()));
  $("updateRelease").addEventListener("click", () => send("PUT", api + "/releases/" + $("chartName").value + labelsQuery("chartLabels"), form()));
  $("deleteRelease").addEventListener("click", () => send("DELETE", api + "/releases/" + $("delInput").value + labelsQuery("delChartLabels")));
  setInterval(() => { updateClusterTable(); updateReleasesTable(); }, 500);
});
