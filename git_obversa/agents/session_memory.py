"""A session's memory through an agent's hooks: grounded at its start in the sources
`obversa.ground` names, and (with `obversa.consolidate`) a summary of the reasons its
commits recorded folded into a memory file at its end. See `context_hooks`.

What a session keeps between its hook runs lives beside what it was told
(`lookup.context.session_file`): the commit HEAD was at when it started (or when its
last summary was written), and, for Gemini, the reasons worked out before an edit.
"""

from __future__ import annotations

import os
import time

from git_obversa.lookup.context import session_file
from git_obversa.repo import location, refs

DEFAULT_SCOPE = "default"
SESSIONS = "/memories/sessions/"
MAX_SUMMARY = 16000  # characters of the summary file (consolidate's output limit)
MAX_SECTION = 4000  # characters one session adds to it
MAX_WHY = 600  # characters of one commit's why in a summary


def _where(cwd: str) -> tuple[str, str, str] | None:
    """(common git dir, git dir, top of the working tree) CWD is in, or None."""
    found = location.located(cwd)
    return None if found is None else (found[0], found[1], found[2])


def _memory(top: str, settings: dict[str, str]):
    from git_obversa.memory.git_memory import open_scope

    scope = settings.get("groundscope") or settings.get("scope") or DEFAULT_SCOPE
    return open_scope(top, scope.strip())


def grounded(cwd: str, settings: dict[str, str]) -> str:
    """The warned prompt of the memory `obversa.ground` names (each source optional: a
    file not written yet is no reason to fail a session's start), or "" when nothing is
    configured, found, or readable."""
    # `/memories/decisions/` names a directory as the port does: without the slash.
    sources = [path.rstrip("/") or path for path in settings.get("ground", "").split()]
    where = _where(cwd)
    if not sources or where is None:
        return ""
    from git_obversa.memory.mechanics import ground

    result = ground(_memory(where[2], settings), [{"path": p, "optional": True} for p in sources])
    if not result["ok"] or not result["value"]["documents"]:
        return ""
    judge = settings.get("groundjudge", "").strip()
    if judge:
        return picked(result["value"]["documents"], judge, where[2])
    return result["value"]["prompt"]


def picked(documents: list[dict], judge: str, cwd: str) -> str:
    """The warned prompt of the DOCUMENTS that apply, as `pick` chooses them: a document
    under a `rules/` directory always applies; the others are asked about with the
    command JUDGE (`obversa.groundJudge`: the questions as JSON on stdin, `{key:
    {"status": "answered", "probability": p}}` on stdout). "" when none applies."""
    import json
    import subprocess

    from git_obversa.memory.mechanics import pick, render_prompt

    def decide(questions: list[dict]) -> dict:
        done = subprocess.run(
            judge,
            shell=True,
            cwd=cwd,
            input=json.dumps(questions),
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        )
        return json.loads(done.stdout)

    candidates = [
        {
            "sourceId": "memory",
            "id": document["path"],
            "role": "rule" if "/rules/" in document["path"] else "reference",
            "applies": "always" if "/rules/" in document["path"] else None,
            "title": document["path"],
            "text": document["text"],
            "signals": {},
        }
        for document in documents
    ]
    chosen = {entry["id"] for entry in pick(candidates, decide)["selected"]}
    kept = [document for document in documents if document["path"] in chosen]
    return render_prompt(kept) if kept else ""


def started(cwd: str, session: str) -> None:
    """Remember the commit HEAD is at as the session SESSION starts (a resumed session
    keeps the one it started at)."""
    where = _where(cwd)
    if where is None or not session:
        return
    record = session_file(where[0], session, "start")
    head = refs.head_commit(where[1], where[0])
    if head is not None and not os.path.exists(record):
        _write(record, head)


def summarize(cwd: str, session: str, settings: dict[str, str]) -> str | None:
    """With `obversa.consolidate` set, fold the reasons recorded by the commits made since
    the session started (or since its last summary) into the summary file; returns the
    memory path written, or None."""
    target = summary_path(settings.get("consolidate", ""), time.strftime("%Y-%m-%d"))
    where = _where(cwd)
    if target is None or where is None or not session:
        return None
    common_dir, git_dir, top = where
    record = session_file(common_dir, session, "start")
    start, head = _read(record), refs.head_commit(git_dir, common_dir)
    if not start or head is None or start == head:
        return None
    from git_obversa.lookup.blame import reasoned_commits

    commits = reasoned_commits(top, rev=f"{start}..{head}")
    if commits:
        section = session_section(commits, session)
        from git_obversa.memory.mechanics import consolidate

        result = consolidate(
            _memory(top, settings),
            target,
            [],
            lambda request: folded(request["prior"], section),
            max_output_chars=MAX_SUMMARY,
        )
        if not result["ok"]:
            return None
    _write(record, head)  # the next summary starts here: nothing is folded in twice
    return target if commits else None


def summary_path(setting: str, date: str) -> str | None:
    """The memory file `obversa.consolidate` names for DATE: `true` -> the sessions
    directory's `<date>.md`, a directory (ending in /) -> its `<date>.md`, a file -> it."""
    value = setting.strip()
    if value.lower() in ("", "false", "no", "off", "0"):
        return None
    if value.lower() in ("true", "yes", "on", "1"):
        value = SESSIONS
    if not value.startswith("/memories/"):
        return None
    return f"{value}{date}.md" if value.endswith("/") else value


def session_section(commits: list[dict], session: str) -> str:
    """One session's part of the summary: each commit's subject and why, scrubbed and
    bounded, newest first."""
    from git_obversa.record.scrub import scrub

    lines = [f"## Session {session[:8] or '?'} ({time.strftime('%H:%M')})", ""]
    for commit in commits:
        why = " ".join(commit["reasoning"].split())
        if len(why) > MAX_WHY:
            why = why[: MAX_WHY - 1].rstrip() + "…"
        lines.append(f"- {commit['subject']} ({commit['commit'][:12]}): {why}")
    section = scrub("\n".join(lines))
    return section if len(section) <= MAX_SECTION else section[: MAX_SECTION - 1] + "…"


def folded(prior: str | None, section: str) -> str:
    """PRIOR with SECTION added at its end; the oldest sections go when both do not fit."""
    parts = [part for part in (prior or "").split("\n\n## ") if part.strip()]
    kept = [part if i == 0 else f"## {part}" for i, part in enumerate(parts)]
    while kept and len("\n\n".join([*kept, section])) > MAX_SUMMARY:
        kept.pop(0)
    return "\n\n".join([*kept, section])


def keep_for_later(cwd: str, key: str, text: str) -> None:
    """Keep TEXT for the hook run that follows (Gemini: after the tool ran), under KEY."""
    where = _where(cwd)
    if where is None or not text:
        return
    _write(session_file(where[0], key, "kept"), text)


def take_kept(cwd: str, key: str) -> str:
    """What `keep_for_later` kept under KEY, once; "" when nothing is."""
    where = _where(cwd)
    if where is None:
        return ""
    record = session_file(where[0], key, "kept")
    text = _read(record)
    if text:
        os.unlink(record)
    return text


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as file:
            return file.read().strip()
    except (OSError, UnicodeDecodeError):
        return ""


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "w", encoding="utf-8") as file:
        file.write(text)
    os.replace(temporary, path)
