"""What each part of the web page shows, as plain JSON-ready data, read from the repository.

Every function here only reads: revisions and paths come from the browser, so a revision
is resolved with `git rev-parse --verify --end-of-options` before anything else sees it,
and paths go after `--` (or stay inside a tree), so neither can become an option of git.
"""

from __future__ import annotations

import os
from typing import Any

from git_obversa.corpus.markdown import open_markdown_corpus
from git_obversa.lookup import blame
from git_obversa.memory import gitstore
from git_obversa.memory.git_memory import (
    SCOPE_REF_PREFIX,
    list_scopes,
    read_blob_text,
    read_scope_tree,
)
from git_obversa.memory.port import MEMORY_ROOT, MemoryFailure
from git_obversa.repo import git

# A page that lists more than this many log entries or search hits stops there and says so.
LOG_LIMIT = 200
SEARCH_LIMIT = 50


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
    lines: list[tuple[int, str, str]] = []
    try:
        commits = blame.lookup(repository, path, rev=commit, lines=lines)
    except blame.BlameError as error:
        raise ViewError(404, str(error)) from None
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


def scopes(repository: str) -> dict[str, Any]:
    """The memory scopes stored in the repository, with their file counts and sizes."""
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
        return {"digest": digest, "files": files}
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
        return {"digest": digest, "path": path, "text": text}
    finally:
        store.close()


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
