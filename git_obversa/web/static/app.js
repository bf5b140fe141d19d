// git obversa web: one page, routed by the URL's hash, reading the server's JSON API.
// Everything from the repository is inserted as text (textContent), never as markup.
"use strict";

const view = document.getElementById("view");
const popup = document.getElementById("why-popup");
const panel = document.getElementById("why-panel");
const panelBody = document.getElementById("why-panel-body");
const revInput = document.getElementById("rev");
let defaultRev = "HEAD";
let fileKeys = null; // the open file's keyboard moves, while a file is shown

function el(tag, attributes, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function href(route, params) {
  return "#/" + route + "?" + new URLSearchParams(params);
}

function link(route, params, text, attributes) {
  return el("a", { href: href(route, params), ...(attributes || {}) }, text);
}

function commitLink(sha, text) {
  return link("commit", { rev: sha }, text || sha.slice(0, 8), { class: "sha", title: "commit " + sha });
}

async function api(path, params) {
  const response = await fetch("/api/" + path + "?" + new URLSearchParams(params || {}));
  const data = await response.json();
  if (!response.ok) throw new Error(data.error || response.statusText);
  return data;
}

function count(number, noun, plural) {
  return `${number} ${number === 1 ? noun : plural || noun + "s"}`;
}

function show(...nodes) {
  view.replaceChildren(...nodes.flat().filter((node) => node !== null && node !== undefined && node !== false));
}

function failure(error) {
  show(el("p", { class: "error" }, error.message));
}

function currentRev(params) {
  return params.get("rev") || defaultRev;
}

function lineRanges(ranges) {
  return ranges.map(([a, b]) => (a === b ? `${a}` : `${a}–${b}`)).join(", ");
}

// A message's paragraphs as one line each: commit messages are wrapped at 72 columns,
// the page wraps them to its own width. List items and indented lines keep their breaks.
function reflow(text) {
  const out = [];
  for (const line of (text || "").split("\n")) {
    const structural = /^\s*([-*+•]|\d+[.)])\s/.test(line) || /^(\s{2,}|\t)/.test(line);
    const previous = out.length ? out[out.length - 1] : "";
    if (line.trim() && !structural && previous.trim() && !/^(\s{2,}|\t)/.test(previous)) {
      out[out.length - 1] = previous + " " + line.trim();
    } else {
      out.push(line);
    }
  }
  return out.join("\n");
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

// ---- A commit's why: the card on hover, in the panel, the log and the commit page ------

// The parts of a commit the page shows, in order; each returns a node or null. A part
// the server adds later (a kept record, who wrote a line) is one more entry here. NUMBER,
// when given, is the line of the file the card is about.
const commitSections = [
  (commit) => commit.reasoning
    ? el("div", { class: "why" }, el("div", { class: "why-label" }, "Why:"),
      el("div", { class: "why-text" }, reflow(commit.reasoning)))
    : el("div", { class: "why-none" }, "No reasoning recorded."),
  (commit) => commit.body && !commit.reasoning
    ? el("div", { class: "body-text" }, reflow(commit.body)) : null,
  // Who wrote the lines, from Git AI notes or Agent Trace records (docs/attribution.md):
  // for one line, the agents whose lines hold it, or none where the notes give it to none.
  (commit, number) => {
    const holds = (ranges) => ranges.some(([first, last]) => first <= number && number <= last);
    const agents = (commit.agents || []).filter((agent) => !number || !agent.lines || holds(agent.lines));
    const texts = agents.map((agent) => agent.text);
    if (number && commit.unattributed && holds(commit.unattributed)) texts.push("not attributed");
    return texts.length
      ? el("div", { class: "why-agents" }, el("div", { class: "why-label" }, "Agent:"),
        texts.map((text) => el("div", { class: "agent" }, text)))
      : null;
  },
];

function whyCard(commit, number) {
  return el("div", { class: "why-card" },
    el("div", { class: "why-subject" }, commit.subject || "(no subject)"),
    el("div", { class: "why-meta" },
      commitLink(commit.commit, commit.commit.slice(0, 12)), " · ", commit.author, " · ",
      (commit.date || "").slice(0, 10)),
    commitSections.map((section) => section(commit, number)));
}

function pin(commit, number) {
  panelBody.replaceChildren(whyCard(commit, number),
    el("p", {}, link("commit", { rev: commit.commit }, "the whole commit →")));
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

// ---- Files ----------------------------------------------------------------

async function showTree(params) {
  const rev = currentRev(params);
  const data = await api("tree", { rev, path: params.get("path") || "" });
  const rows = data.entries.map((entry) =>
    el("tr", { "data-path": entry.path },
      el("td", { class: entry.type },
        entry.type === "dir"
          ? link("tree", { rev, path: entry.path }, entry.name)
          : entry.type === "file"
            ? link("file", { rev, path: entry.path }, entry.name)
            : entry.name),
      el("td", { class: "size" }, entry.size === null ? "" : entry.size + " B")));
  show(crumbs(rev, data.path, false),
    rows.length ? el("table", { class: "entries" }, rows) : el("p", { class: "muted" }, "This directory is empty."),
    el("p", { class: "muted legend" }, el("span", { class: "dot" }, "●"), " a line of this file records why it was written"));
  // Marked when known: confirming a file costs a blame, so the list is painted first.
  api("reasoned", { rev, path: data.path }).then((marks) => {
    for (const path of marks.files) {
      const row = view.querySelector(`tr[data-path="${CSS.escape(path)}"]`);
      if (row) row.classList.add("reasoned");
    }
  }).catch(() => {});
}

// ---- A file with its blame gutter ----------------------------------------------

async function showFile(params) {
  const rev = currentRev(params);
  const path = params.get("path") || "";
  const data = await api("blame", { rev, path });
  const permalink = (number) => href("file", { rev: data.commit, path: data.path, line: number });
  const rows = [];
  const starts = []; // first line of each run whose commit records reasoning
  let previous = null;
  for (const line of data.lines) {
    const commit = data.commits[line.commit];
    const first = line.commit !== previous;
    previous = line.commit;
    const gutter = el("td", { class: "gutter" + (commit.reasoning ? " reasoned" : "") });
    if (first) {
      if (commit.reasoning) starts.push(line.number);
      const renamed = commit.paths.length && !commit.paths.includes(data.path);
      const title = commit.subject + (renamed ? `\n(the file was ${commit.paths.join(", ")} in that commit)` : "");
      gutter.append(el("div", { class: "gutter-text", title },
        commitLink(commit.commit), " ", el("span", { class: "date" }, (commit.date || "").slice(0, 10)),
        " ", el("span", { class: "subject" }, commit.subject)));
    }
    const number = el("a", { href: permalink(line.number), title: "link to line " + line.number }, line.number);
    number.addEventListener("click", (event) => {
      event.preventDefault();
      history.replaceState(null, "", permalink(line.number));
      select(line.number);
    });
    const row = el("tr", { class: first ? "first" : "", "data-commit": line.commit, "data-line": line.number },
      gutter, el("td", { class: "number" }, number), el("td", { class: "code" }, line.text));
    row.addEventListener("mouseenter", (event) => {
      popup.replaceChildren(whyCard(commit, line.number));
      popup.hidden = false;
      placePopup(event);
    });
    row.addEventListener("mousemove", placePopup);
    row.addEventListener("mouseleave", () => { popup.hidden = true; });
    row.addEventListener("click", (event) => {
      if (event.target.closest("a")) return;
      select(line.number);
    });
    rows.push(row);
  }
  let selected = null;
  function select(number, scroll) {
    const row = view.querySelector(`tr[data-line="${number}"]`);
    if (!row) return;
    selected = number;
    for (const old of view.querySelectorAll("tr.selected, tr.current")) old.classList.remove("selected", "current");
    for (const same of view.querySelectorAll(`tr[data-commit="${row.dataset.commit}"]`)) same.classList.add("selected");
    row.classList.add("current");
    pin(data.commits[row.dataset.commit], number);
    if (scroll) row.scrollIntoView({ block: "center" });
  }
  function step(direction) {
    const here = selected || 0;
    const target = direction > 0 ? starts.find((n) => n > here) : [...starts].reverse().find((n) => n < here);
    if (target === undefined) return;
    history.replaceState(null, "", permalink(target));
    select(target, true);
  }
  function move(direction) {
    const target = Math.min(Math.max((selected || 0) + direction, 1), data.lines.length);
    history.replaceState(null, "", permalink(target));
    select(target, true);
  }
  const reasonedCommits = Object.values(data.commits).filter((commit) => commit.reasoning);
  const summary = reasonedCommits.length
    ? el("details", { class: "reasons", open: reasonedCommits.length <= 5 ? "" : null },
      el("summary", {}, `Why these lines: ${count(reasonedCommits.length, "commit")} with recorded reasoning`),
      el("ul", {}, reasonedCommits.map((commit) => el("li", {},
        commitLink(commit.commit), " ", commit.subject, " — ",
        el("span", { class: "muted" }, commit.ranges.length === 1 && commit.ranges[0][0] === commit.ranges[0][1] ? "line " : "lines "),
        commit.ranges.map(([a, b], index) => [index ? ", " : "",
          link("file", { rev: data.commit, path: data.path, line: a }, a === b ? `${a}` : `${a}–${b}`)])))))
    : null;
  show(crumbs(rev, data.path, true),
    el("p", { class: "muted" }, `${count(data.lines.length, "line")} from ` +
      `${count(Object.keys(data.commits).length, "commit")}, ${reasonedCommits.length} with recorded reasoning (●). ` +
      "Hover a line for its why; click to pin it."),
    el("div", { class: "file-tools" },
      el("button", { type: "button", id: "previous-why", onclick: () => step(-1), disabled: starts.length ? null : "" }, "◀ previous why (p)"),
      el("button", { type: "button", id: "next-why", onclick: () => step(1), disabled: starts.length ? null : "" }, "next why (n) ▶")),
    summary,
    el("table", { class: "blame" }, el("tbody", {}, rows)));
  fileKeys = { n: () => step(1), p: () => step(-1), j: () => move(1), k: () => move(-1) };
  const line = Number(params.get("line"));
  if (line) select(line, true);
}

// ---- A commit ------------------------------------------------------------------

async function showCommit(params) {
  const rev = currentRev(params);
  const data = await api("commit", { rev });
  const files = data.files.map((file) => el("tr", {},
    el("td", { class: "status " + file.status }, file.status),
    el("td", {},
      file.status === "deleted"
        ? file.path
        : link("file", { rev: data.commit, path: file.path }, file.path),
      file.old_path ? el("span", { class: "muted" }, ` (was ${file.old_path})`) : null)));
  show(el("h2", { class: "commit-subject" }, data.subject || "(no subject)"),
    el("div", { class: "why-meta" }, el("span", { class: "sha" }, data.commit), " · ", data.author,
      ` <${data.email}> · `, (data.date || "").replace("T", " ")),
    el("div", { class: "parents" }, data.parents.length ? count(data.parents.length, "parent") + ": " : "no parent (the first commit)",
      data.parents.map((parent, index) => [index ? ", " : "", commitLink(parent)])),
    commitSections.map((section) => section(data)),
    data.reasoning && data.body ? el("details", { class: "body" }, el("summary", {}, "The rest of the message"),
      el("div", { class: "body-text" }, reflow(data.body))) : null,
    el("h3", {}, count(data.files.length, "file") + " changed"),
    el("table", { class: "entries files" }, files));
}

// ---- Log ------------------------------------------------------------------

async function showLog(params) {
  const rev = currentRev(params);
  const data = await api("log", { rev, path: params.get("path") || "" });
  const items = data.commits.map((commit) => el("article", {}, whyCard(commit),
    el("div", { class: "muted" }, link("commit", { rev: commit.commit }, "files and the whole message →"))));
  show(el("h2", {}, "Commits with recorded reasoning"),
    el("p", { class: "muted" }, `from ${rev}` + (data.path ? `, touching ${data.path}` : "")),
    items.length ? el("div", { class: "commits" }, items)
      : el("p", { class: "muted" }, "No commit records reasoning yet: `git obversa install` adds the hook that writes it."),
    data.truncated ? el("p", { class: "muted" }, "Older commits are not shown.") : null);
}

// ---- Memory -----------------------------------------------------------------

function scopeLabel(scope) {
  return scope.name || scope.digest.slice(0, 12);
}

function scopeCrumbs(data, last) {
  const nodes = [link("memory", {}, "scopes"), " / "];
  nodes.push(last ? link("memory", { digest: data.digest }, scopeLabel(data)) : el("span", {}, scopeLabel(data)));
  if (last) nodes.push(" / ", el("span", {}, last));
  return el("div", { class: "crumbs" }, nodes,
    el("span", { class: "muted" }, "  scope " + data.digest.slice(0, 12)));
}

async function showMemory(params) {
  const digest = params.get("digest");
  const path = params.get("path");
  if (digest && path) {
    const data = await api("scope-file", { digest, path });
    const scopeOption = data.name ? `--scope ${data.name}` : `--scope-digest ${data.digest.slice(0, 12)}`;
    const rows = data.history.map((state) => el("tr", {},
      el("td", { class: "sha" }, state.state.slice(0, 12)),
      el("td", {}, state.time.replace("T", " ").replace("Z", "")),
      el("td", {}, state.summary),
      el("td", {}, el("code", {}, `git obversa memory restore ${scopeOption} ${state.state.slice(0, 12)}`))));
    show(scopeCrumbs(data, data.path),
      el("div", { class: "memory-text" }, data.text),
      el("h3", {}, "History of this file"),
      rows.length
        ? [el("p", { class: "muted" }, "A restore brings the whole scope back to that state, as a new state (so it can be undone the same way)."),
          el("table", { class: "entries history" }, rows)]
        : el("p", { class: "muted" }, "No recorded state changed this file."));
  } else if (digest) {
    const data = await api("scope", { digest });
    show(scopeCrumbs(data, null),
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
          el("td", { class: "muted sha" }, scope.digest.slice(0, 12)),
          el("td", { class: "size" }, scope.error ? scope.error : `${count(scope.files, "file")}, ${scope.bytes} B`))))
        : el("p", { class: "muted" }, "No memory scopes in this repository yet: `git obversa memory create /memories/notes.md -` writes the first."));
  }
}

// ---- Search -----------------------------------------------------------------

function searchTerms(query) {
  return query.toLowerCase().split(/[^\p{L}\p{N}_]+/u).filter((term) => term.length > 1);
}

function highlighted(text, terms) {
  if (!terms.length) return [text];
  const escaped = terms.map((term) => term.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  const pattern = new RegExp("(" + escaped.join("|") + ")", "giu");
  return text.split(pattern).map((part, index) => (index % 2 ? el("mark", {}, part) : part));
}

// The lines of a passage that hold a term, with one line around each; gaps become "…".
function matchingLines(passage, terms) {
  const lines = passage.text.split("\n");
  const hits = lines.map((line) => terms.some((term) => line.toLowerCase().includes(term)));
  const keep = lines.map((_, index) => hits.slice(Math.max(0, index - 1), index + 2).some(Boolean));
  if (!keep.some(Boolean)) keep.fill(true, 0, 3);
  const shown = [];
  let gap = false;
  lines.forEach((line, index) => {
    if (keep[index]) {
      if (gap && shown.length) shown.push({ gap: true });
      shown.push({ number: passage.start_line + index, line, hit: hits[index] });
      gap = false;
    } else {
      gap = true;
    }
  });
  if (gap) shown.push({ gap: true });
  return shown;
}

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
    show(el("h2", {}, "Search"), form, el("p", { class: "muted" }, "The repository's Markdown files (*.md) at the revision."));
    input.focus();
    return;
  }
  const data = await api("search", { rev, q: query });
  const terms = searchTerms(query);
  const hits = data.hits.map((hit) => {
    const lines = matchingLines(hit.passage, terms);
    const firstHit = lines.find((line) => line.hit) || lines.find((line) => !line.gap);
    return el("article", {},
      el("div", {}, link("file", { rev, path: hit.file, line: firstHit.number }, hit.file),
        el("span", { class: "muted" }, ` lines ${hit.passage.start_line}–${hit.passage.end_line}`)),
      el("div", { class: "hit-text" }, lines.map((line) => line.gap
        ? el("div", { class: "gap" }, "…")
        : el("div", {}, el("span", { class: "hit-number" }, line.number), " ", highlighted(line.line, terms)))));
  });
  show(el("h2", {}, "Search"), form,
    el("p", { class: "muted" }, `${count(hits.length, "passage")} at ${rev}`),
    el("div", { class: "hits" }, hits));
}

// ---- Routing and keys ---------------------------------------------------------

const routes = { tree: showTree, file: showFile, commit: showCommit, log: showLog, memory: showMemory, search: showSearch };
const navOf = { file: "tree", commit: "log" };

async function route() {
  popup.hidden = true;
  panel.hidden = true;  // a pinned why belongs to the file it was pinned on
  fileKeys = null;
  const hash = location.hash.replace(/^#\/?/, "");
  const [name, query] = hash.split("?");
  const params = new URLSearchParams(query || "");
  const handler = routes[name] || showTree;
  revInput.value = currentRev(params);
  const current = navOf[name] || (routes[name] ? name : "tree");
  for (const navLink of document.querySelectorAll("nav a")) {
    navLink.classList.toggle("current", navLink.id === "nav-" + current);
  }
  try {
    await handler(params);
  } catch (error) {
    failure(error);
  }
  document.body.dataset.ready = hash;  // tests wait for this
}

document.addEventListener("keydown", (event) => {
  if (event.ctrlKey || event.metaKey || event.altKey) return;
  if (event.target.closest("input, textarea, select")) {
    if (event.key === "Escape") event.target.blur();
    return;
  }
  if (event.key === "Escape") {
    panel.hidden = true;
    popup.hidden = true;
  } else if (event.key === "/") {
    event.preventDefault();
    const input = document.getElementById("search-input");
    if (input) input.focus();
    else location.hash = "#/search";
  } else if (fileKeys && fileKeys[event.key]) {
    fileKeys[event.key]();
  } else {
    return;
  }
});

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
