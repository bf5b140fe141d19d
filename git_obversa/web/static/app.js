// git obversa web: one page, routed by the URL's hash, reading the server's JSON API.
// Everything from the repository is inserted as text (textContent), never as markup.
"use strict";

const view = document.getElementById("view");
const popup = document.getElementById("why-popup");
const panel = document.getElementById("why-panel");
const panelBody = document.getElementById("why-panel-body");
const revInput = document.getElementById("rev");
let defaultRev = "HEAD";

function el(tag, attributes, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes || {})) {
    if (value === undefined || value === null) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function link(route, params, text) {
  return el("a", { href: "#/" + route + "?" + new URLSearchParams(params) }, text);
}

async function api(path, params) {
  const response = await fetch("/api/" + path + "?" + new URLSearchParams(params || {}));
  const data = await response.json();
  if (!response.ok) throw new Error(data.error || response.statusText);
  return data;
}

function count(number, noun) {
  return `${number} ${noun}${number === 1 ? "" : "s"}`;
}

function show(...nodes) {
  view.replaceChildren(...nodes);
}

function failure(error) {
  show(el("p", { class: "error" }, error.message));
}

function currentRev(params) {
  return params.get("rev") || defaultRev;
}

function crumbs(rev, path, last) {
  const parts = path ? path.split("/") : [];
  const nodes = [link("tree", { rev, path: "" }, "/")];
  parts.forEach((part, index) => {
    const sub = parts.slice(0, index + 1).join("/");
    const isLast = index === parts.length - 1;
    nodes.push(isLast && last ? el("span", {}, part) : link("tree", { rev, path: sub }, part));
    if (!isLast) nodes.push(" / ");
  });
  return el("div", { class: "crumbs" }, nodes, el("span", { class: "muted" }, "  at " + rev));
}

// ---- Files ----------------------------------------------------------------

async function showTree(params) {
  const rev = currentRev(params);
  const data = await api("tree", { rev, path: params.get("path") || "" });
  const rows = data.entries.map((entry) =>
    el("tr", {},
      el("td", { class: entry.type },
        entry.type === "dir"
          ? link("tree", { rev, path: entry.path }, entry.name)
          : entry.type === "file"
            ? link("file", { rev, path: entry.path }, entry.name)
            : entry.name),
      el("td", { class: "size" }, entry.size === null ? "" : entry.size + " B")));
  show(crumbs(rev, data.path, false), el("table", { class: "entries" }, rows));
}

// ---- A file with its blame gutter ----------------------------------------------

function whyCard(commit) {
  const card = el("div", { class: "why-card" },
    el("div", { class: "why-subject" }, commit.subject || "(no subject)"),
    el("div", { class: "why-meta" },
      el("span", { class: "sha" }, commit.commit.slice(0, 12)), " · ", commit.author, " · ",
      (commit.date || "").slice(0, 10)));
  if (commit.reasoning) {
    card.append(el("div", { class: "why-label" }, "Why:"), el("div", { class: "why-text" }, commit.reasoning));
  } else {
    card.append(el("div", { class: "why-none" }, "No reasoning recorded."));
    if (commit.body) card.append(el("div", { class: "why-text" }, commit.body));
  }
  return card;
}

function pin(commit) {
  panelBody.replaceChildren(whyCard(commit));
  panel.hidden = false;
}

function placePopup(event) {
  const margin = 14;
  let left = event.clientX + margin;
  let top = event.clientY + margin;
  const width = popup.offsetWidth;
  const height = popup.offsetHeight;
  if (left + width > window.innerWidth) left = Math.max(0, event.clientX - width - margin);
  if (top + height > window.innerHeight) top = Math.max(0, event.clientY - height - margin);
  popup.style.left = left + "px";
  popup.style.top = top + "px";
}

async function showFile(params) {
  const rev = currentRev(params);
  const path = params.get("path") || "";
  const data = await api("blame", { rev, path });
  const rows = [];
  let previous = null;
  for (const line of data.lines) {
    const commit = data.commits[line.commit];
    const first = line.commit !== previous;
    previous = line.commit;
    const gutter = el("td", { class: "gutter" + (commit.reasoning ? " reasoned" : "") });
    if (first) {
      gutter.append(el("span", { class: "sha" }, commit.commit.slice(0, 8)), " ",
        (commit.date || "").slice(0, 10), " ", commit.subject);
      gutter.title = commit.subject;
    }
    const row = el("tr", { class: first ? "first" : "", "data-commit": line.commit, "data-line": line.number },
      gutter,
      el("td", { class: "number" }, line.number),
      el("td", { class: "code" }, line.text));
    row.addEventListener("mouseenter", (event) => {
      popup.replaceChildren(whyCard(commit));
      popup.hidden = false;
      placePopup(event);
    });
    row.addEventListener("mousemove", placePopup);
    row.addEventListener("mouseleave", () => { popup.hidden = true; });
    row.addEventListener("click", () => {
      for (const selected of view.querySelectorAll("tr.selected")) selected.classList.remove("selected");
      for (const same of view.querySelectorAll(`tr[data-commit="${line.commit}"]`)) same.classList.add("selected");
      pin(commit);
    });
    rows.push(row);
  }
  const reasoned = Object.values(data.commits).filter((commit) => commit.reasoning).length;
  show(crumbs(rev, data.path, true),
    el("p", { class: "muted" }, `${count(data.lines.length, "line")} from ` +
      `${count(Object.keys(data.commits).length, "commit")}, ${reasoned} with recorded reasoning (●). ` +
      "Hover a line for its why; click to pin it."),
    el("table", { class: "blame" }, el("tbody", {}, rows)));
}

// ---- Log ------------------------------------------------------------------

async function showLog(params) {
  const rev = currentRev(params);
  const data = await api("log", { rev, path: params.get("path") || "" });
  const items = data.commits.map((commit) => el("article", {}, whyCard(commit)));
  show(el("h2", {}, "Commits with recorded reasoning"),
    el("p", { class: "muted" }, `from ${rev}` + (data.path ? `, touching ${data.path}` : "")),
    items.length ? el("div", { class: "commits" }, items) : el("p", { class: "muted" }, "None yet."),
    data.truncated ? el("p", { class: "muted" }, "Older commits are not shown.") : null);
}

// ---- Memory -----------------------------------------------------------------

function scopeLabel(scope) {
  return scope.name ? `${scope.name} (${scope.digest.slice(0, 12)})` : scope.digest.slice(0, 12);
}

async function showMemory(params) {
  const digest = params.get("digest");
  const path = params.get("path");
  if (digest && path) {
    const data = await api("scope-file", { digest, path });
    show(el("div", { class: "crumbs" }, link("memory", {}, "scopes"), " / ",
      link("memory", { digest: data.digest }, data.digest.slice(0, 12)), " / ", data.path),
      el("div", { class: "memory-text" }, data.text));
  } else if (digest) {
    const data = await api("scope", { digest });
    show(el("div", { class: "crumbs" }, link("memory", {}, "scopes"), " / ", data.digest.slice(0, 12)),
      data.files.length
        ? el("table", { class: "entries" }, data.files.map((file) => el("tr", {},
          el("td", {}, link("memory", { digest: data.digest, path: file.path }, file.path)),
          el("td", { class: "size" }, file.bytes + " B"))))
        : el("p", { class: "muted" }, "This scope holds no files."));
  } else {
    const data = await api("scopes");
    show(el("h2", {}, "Memory scopes"),
      data.scopes.length
        ? el("table", { class: "entries" }, data.scopes.map((scope) => el("tr", {},
          el("td", {}, link("memory", { digest: scope.digest }, scopeLabel(scope))),
          el("td", { class: "size" }, scope.error ? scope.error : `${scope.files} files, ${scope.bytes} B`))))
        : el("p", { class: "muted" }, "No memory scopes in this repository yet."));
  }
}

// ---- Search -----------------------------------------------------------------

async function showSearch(params) {
  const rev = currentRev(params);
  const query = params.get("q") || "";
  const input = el("input", { name: "q", id: "search-input", value: query, size: 40, placeholder: "search the Markdown files" });
  const form = el("form", { id: "search-form" }, input, " ", el("button", { type: "submit" }, "Search"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    location.hash = "#/search?" + new URLSearchParams({ rev, q: input.value });
  });
  if (!query) {
    show(el("h2", {}, "Search"), form);
    input.focus();
    return;
  }
  const data = await api("search", { rev, q: query });
  const hits = data.hits.map((hit) => el("article", {},
    el("div", {}, link("file", { rev, path: hit.file }, hit.file),
      el("span", { class: "muted" }, ` lines ${hit.passage.start_line}–${hit.passage.end_line}`)),
    el("div", { class: "hit-text" }, hit.passage.text)));
  show(el("h2", {}, "Search"), form,
    el("p", { class: "muted" }, `${hits.length} passages at ${rev}`),
    el("div", { class: "hits" }, hits));
}

// ---- Routing ----------------------------------------------------------------

const routes = { tree: showTree, file: showFile, log: showLog, memory: showMemory, search: showSearch };

async function route() {
  popup.hidden = true;
  panel.hidden = true;  // a pinned why belongs to the file it was pinned on
  const hash = location.hash.replace(/^#\/?/, "");
  const [name, query] = hash.split("?");
  const params = new URLSearchParams(query || "");
  const handler = routes[name] || showTree;
  revInput.value = currentRev(params);
  for (const navLink of document.querySelectorAll("nav a")) {
    navLink.classList.toggle("current", navLink.id === "nav-" + (name === "file" ? "tree" : (routes[name] ? name : "tree")));
  }
  try {
    await handler(params);
  } catch (error) {
    failure(error);
  }
  document.body.dataset.ready = hash;  // tests wait for this
}

document.getElementById("rev-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const hash = location.hash.replace(/^#\/?/, "");
  const [name, query] = hash.split("?");
  const params = new URLSearchParams(query || "");
  params.set("rev", revInput.value.trim() || defaultRev);
  location.hash = "#/" + (name || "tree") + "?" + params;
});
document.getElementById("why-close").addEventListener("click", () => { panel.hidden = true; });
window.addEventListener("hashchange", route);

api("info").then((info) => {
  defaultRev = info.rev;
  document.getElementById("repository").textContent = info.repository;
  document.title = info.repository + " · git obversa";
}).catch(() => {}).finally(route);
