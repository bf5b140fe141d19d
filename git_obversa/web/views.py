"""What each part of the web page shows, as plain JSON-ready data, read from the repository.

Every function here only reads: revisions and paths come from the browser, so a revision
is resolved with `git rev-parse --verify --end-of-options` before anything else sees it,
and paths go after `--` (or stay inside a tree), so neither can become an option of git.
"""

from __future__ import annotations

import os
from typing import Any

from git_obversa.corpus.markdown import open_markdown_corpus
from git_obversa.lookup import blame, commit_fields
from git_obversa.memory import gitstore
from git_obversa.memory.git_memory import (
    SCOPE_REF_PREFIX,
    list_scopes,
    read_blob_text,
    read_scope_tree,
)
from git_obversa.memory.history import scope_log
from git_obversa.memory.names import by_digest, names
from git_obversa.memory.port import MEMORY_ROOT, MemoryFailure
from git_obversa.repo import git

# A page that lists more than this many log entries or search hits stops there and says so.
LOG_LIMIT = 200
SEARCH_LIMIT = 50
# A directory's files are confirmed to carry reasoning by a blame each, at most this many.
MARK_LIMIT = 40
STATUS_WORDS = {"A": "added", "M": "modified", "D": "deleted", "R": "renamed", "C": "copied",
                "T": "type changed"}  # fmt: skip


class ViewError(Exception):
    """A request the repository cannot answer: STATUS is the HTTP status to send."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def resolve(repository: str, rev: str) -> str:
    """The commit REV names, as a full id; ViewError 404 when it names none."""
    if not rev or "\0" in rev:
        raise ViewError(400, "a revision is required")
    completed = git.run(
        ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"],
        repository,
        check=False,
    )
    if completed.returncode != 0:
        raise ViewError(404, f"{rev!r} is not a commit in this repository")
    return completed.stdout.strip()


def _tree_path(path: str) -> str:
    """PATH as a path inside a tree: no leading or trailing slash, no `.` or `..` segment."""
    segments = [segment for segment in path.split("/") if segment]
    if any(segment in (".", "..") for segment in segments) or "\0" in path:
        raise ViewError(400, f"{path!r} is not a path inside the repository")
    return "/".join(segments)


def tree(repository: str, rev: str, path: str = "") -> dict[str, Any]:
    """The entries of directory PATH at REV: directories first, then files, by name."""
    commit = resolve(repository, rev)
    path = _tree_path(path)
    spec = f"{commit}:{path}" if path else f"{commit}^{{tree}}"
    completed = git.run(["ls-tree", "-z", "--long", spec], repository, check=False)
    if completed.returncode != 0:
        raise ViewError(404, f"{path or '/'} is not a directory at {rev}")
    entries = []
    for record in completed.stdout.split("\0"):
        if not record:
            continue
        info, name = record.split("\t", 1)
        mode, kind, _, size = info.split()
        entries.append(
            {
                "name": name,
                "path": f"{path}/{name}" if path else name,
                "type": {"tree": "dir", "commit": "submodule"}.get(kind, "file"),
                "size": None if size == "-" else int(size),
                "symlink": mode == "120000",
            }
        )
    entries.sort(key=lambda entry: (entry["type"] != "dir", entry["name"]))
    return {"rev": rev, "commit": commit, "path": path, "entries": entries}


def file_blame(repository: str, rev: str, path: str) -> dict[str, Any]:
    """Every line of PATH at REV with the commit that last changed it, and those commits
    with their recorded reasoning (the data of `git obversa blame`)."""
    commit = resolve(repository, rev)
    path = _tree_path(path)
    if not path:
        raise ViewError(400, "a file path is required")
    from git_obversa.attribution import who

    lines: list[tuple[int, str, str]] = []
    origins = who.wanted(repository)
    try:
        commits = blame.lookup(repository, path, rev=commit, lines=lines, origins=origins)
    except blame.BlameError as error:
        raise ViewError(404, str(error)) from None
    # Who wrote each line: the page shows, for the line pointed at, the agents whose
    # `lines` hold it, or "not attributed" when the commit's `unattributed` do.
    who.attach(commits, origins, repository)
    for found in commits.values():
        found["agents"] = [{**agent, "text": who.describe(agent)} for agent in found["agents"]]
    return {
        "rev": rev,
        "commit": commit,
        "path": path,
        "lines": [{"number": n, "commit": sha, "text": text} for n, sha, text in lines],
        "commits": commits,
    }


def log(repository: str, rev: str, path: str = "") -> dict[str, Any]:
    """Commits reachable from REV (touching PATH, if given) that record reasoning, newest
    first, at most LOG_LIMIT (the data of `git obversa log`)."""
    commit = resolve(repository, rev)
    path = _tree_path(path)
    try:
        commits = blame.reasoned_commits(
            repository, [path] if path else [], rev=commit, limit=LOG_LIMIT + 1
        )
    except blame.BlameError as error:
        raise ViewError(404, str(error)) from None
    return {
        "rev": rev,
        "path": path,
        "commits": commits[:LOG_LIMIT],
        "truncated": len(commits) > LOG_LIMIT,
    }


def commit(repository: str, rev: str) -> dict[str, Any]:
    """One commit: its message split as `why` splits it (subject, body, reasoning), its
    parents, and the files it changed against its first parent.

    Further parts of a commit (a kept record, who wrote each line) go in as keys of this
    dict; the page shows the keys it knows."""
    sha = resolve(repository, rev)
    shown = git.run(
        ["show", "-s", "--format=%H%n%P%n%aN%n%aE%n%aI%n%B", sha, "--"], repository
    ).stdout
    full, parents, author, email, date, message = shown.split("\n", 5)
    keys = ("commit", "author", "email", "date", "subject", "body", "reasoning")
    found = dict(zip(keys, commit_fields(full, author, email, date, message), strict=True))
    parent_ids = parents.split()
    base = [parent_ids[0], sha] if parent_ids else ["--root", sha]
    changed = git.run(
        ["diff-tree", "-r", "-z", "-M", "--no-commit-id", "--name-status", *base], repository
    ).stdout.split("\0")
    files = []
    at = 0
    while at < len(changed) - 1:
        status = changed[at]
        letter = status[:1]
        if letter in ("R", "C"):
            old, new = changed[at + 1], changed[at + 2]
            at += 3
        else:
            old, new = None, changed[at + 1]
            at += 2
        files.append({"path": new, "old_path": old, "status": STATUS_WORDS.get(letter, letter)})
    from git_obversa.attribution.who import agents_of, describe

    agents = agents_of({sha: [file["path"] for file in files]}, repository).get(sha, [])
    agents = [{**agent, "text": describe(agent)} for agent in agents]
    return {**found, "parents": parent_ids, "files": files, "agents": agents}


def reasoned_files(repository: str, rev: str, path: str = "") -> dict[str, Any]:
    """The files directly in directory PATH at REV with a line whose commit records
    reasoning: the files a reasoned commit touched, each confirmed by its blame (at most
    MARK_LIMIT of them; `unconfirmed` lists the rest)."""
    sha = resolve(repository, rev)
    path = _tree_path(path)
    try:
        reasoned = blame.reasoned_commits(repository, [path] if path else [], rev=sha)
    except blame.BlameError as error:
        raise ViewError(404, str(error)) from None
    touched: set[str] = set()
    if reasoned:
        ids = "".join(item["commit"] + "\n" for item in reasoned)
        listed = git.run(
            ["diff-tree", "--stdin", "-r", "-z", "--root", "--no-commit-id", "--name-only"],
            repository,
            input=ids,
        ).stdout
        prefix = f"{path}/" if path else ""
        for name in listed.split("\0"):
            if name.startswith(prefix) and "/" not in name[len(prefix) :]:
                touched.add(name)
    present = {entry["path"] for entry in tree(repository, sha, path)["entries"]}
    candidates = sorted(touched & present)
    files = []
    for name in candidates[:MARK_LIMIT]:
        try:
            owners = blame.lookup(repository, name, rev=sha)
        except blame.BlameError:
            continue
        if any(owner["reasoning"] is not None for owner in owners.values()):
            files.append(name)
    return {"rev": rev, "path": path, "files": files, "unconfirmed": candidates[MARK_LIMIT:]}


def scopes(repository: str) -> dict[str, Any]:
    """The memory scopes stored in the repository, with their names, file counts and
    sizes."""
    try:
        found = list_scopes(repository)
    except MemoryFailure as error:
        raise ViewError(500, error.message) from None
    return {"scopes": found}


def scope(repository: str, digest: str) -> dict[str, Any]:
    """The files of one scope, by its digest (or a unique prefix of it)."""
    store = gitstore.open_store(os.path.realpath(repository))
    try:
        digest, value = _scope_ref(store, digest)
        try:
            stored = read_scope_tree(store, value, digest, None)
        except MemoryFailure as error:
            raise ViewError(500, error.message) from None
        files = [
            {"path": path, "bytes": entry.byte_length}
            for path, entry in sorted(stored.entries.items())
        ]
        return {"digest": digest, "name": names(store).get(digest), "files": files}
    finally:
        store.close()


def scope_file(repository: str, digest: str, path: str) -> dict[str, Any]:
    """The text of one memory file of a scope."""
    store = gitstore.open_store(os.path.realpath(repository))
    try:
        digest, value = _scope_ref(store, digest)
        try:
            stored = read_scope_tree(store, value, digest, None)
            if path not in stored.entries:
                raise ViewError(404, f"{path} is not a file of scope {digest[:12]}")
            text = read_blob_text(store, stored.blobs[path], stored.entries[path].byte_length)
        except MemoryFailure as error:
            raise ViewError(500, error.message) from None
        name = names(store).get(digest)
    finally:
        store.close()
    return {
        "digest": digest,
        "name": name,
        "path": path,
        "text": text,
        "history": _file_history(repository, digest, path),
    }


def _file_history(repository: str, digest: str, path: str) -> list[dict[str, Any]]:
    """The states of the scope that changed PATH, newest first (`memory log`'s entries)."""
    try:
        # By digest (a --scope is a name); record=False: the page writes nothing.
        states = scope_log(repository, by_digest(digest), record=False)
    except MemoryFailure:
        return []
    changed = []
    for state in states:
        touched = state.get("added", []) + state.get("changed", []) + state.get("removed", [])
        if path in touched:
            how = "added" if path in state["added"] else "changed"
            changed.append({**state, "change": "removed" if path in state["removed"] else how})
    return changed


def _scope_ref(store: Any, digest: str) -> tuple[str, str]:
    """(full digest, tree id) of the one scope whose digest starts with DIGEST."""
    if not digest or not all(c in "0123456789abcdef" for c in digest):
        raise ViewError(400, f"{digest!r} is not a scope digest")
    refs = store.list_refs(SCOPE_REF_PREFIX)
    matches = [ref for ref in refs if ref[len(SCOPE_REF_PREFIX) :].startswith(digest)]
    if len(matches) != 1:
        raise ViewError(404, f"no single scope has a digest starting with {digest}")
    return matches[0][len(SCOPE_REF_PREFIX) :], refs[matches[0]]


def search(repository: str, rev: str, query: str, directory: str = "") -> dict[str, Any]:
    """Passages of the Markdown files at REV (under DIRECTORY) that match QUERY, best
    first: the corpus search of `git obversa corpus search --rev`."""
    commit = resolve(repository, rev)
    directory = _tree_path(directory)
    if not query.strip():
        return {"rev": rev, "query": query, "hits": []}
    try:
        corpus = open_markdown_corpus(
            repository=repository, rev=commit, directory=directory or None
        )
        hits = corpus.search(query, limit=SEARCH_LIMIT)
    except (MemoryFailure, TypeError, ValueError) as error:
        raise ViewError(404, getattr(error, "message", str(error))) from None
    for hit in hits:
        # The corpus names a file by its memory path; the page links it to the tree.
        inner = hit["path"].removeprefix(MEMORY_ROOT).lstrip("/")
        hit["file"] = f"{directory}/{inner}" if directory else inner
    return {"rev": rev, "query": query, "directory": directory, "hits": hits}
