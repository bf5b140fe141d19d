"""Who wrote a commit's lines, read back from the notes: a Git AI authorship log under
`refs/notes/ai` and an Agent Trace record under `refs/notes/agent-trace`, whether
git-obversa wrote them or another tool did. On `why`'s path: it imports nothing more than
the lookup has loaded until a notes ref is there."""

import os

from git_obversa.attribution import AGENT_TRACE_REF, GIT_AI_REF
from git_obversa.repo import git, location, refs

TYPE_CHECKING = False  # `typing` and friends only for type checkers
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping


def notes(
    commits: "Iterable[str]", ref: str, cwd: str | os.PathLike[str] | None = None
) -> dict[str, str]:
    """{commit: its note under REF} for those of COMMITS that have one (one `git log`)."""
    commits = list(commits)
    if not commits:
        return {}
    [(status, found)] = git.outputs(
        [
            ["log", "--no-walk=unsorted", "-z", "--no-notes", f"--notes={ref}", "--format=%H%n%N"]
            + commits
            + ["--"]
        ],
        cwd,
    )
    texts = {}
    for entry in found.decode("utf-8", "replace").split("\0") if status == 0 else []:
        commit, _, text = entry.partition("\n")
        if text.strip():
            texts[commit] = text
    return texts


def notes_refs(cwd: str | os.PathLike[str] | None = None) -> list[str]:
    """The notes refs of both formats this repository has, read from its files (both,
    for git to tell, where the layout is not a plain one)."""
    place = location.located(cwd or ".")
    if place is None:
        return [GIT_AI_REF, AGENT_TRACE_REF]
    return [ref for ref in (GIT_AI_REF, AGENT_TRACE_REF) if refs.ref_id(place[0], ref)]


def agents_of(
    commits: "Mapping[str, Iterable[str]]", cwd: str | os.PathLike[str] | None = None
) -> dict[str, list[dict]]:
    """{commit: the agents that wrote its lines in those PATHS}, each {"agent", "model",
    "session", "contributor"}, for COMMITS ({commit: paths}); commits with none left out.
    A Git AI attestation names an `ai` author; an Agent Trace conversation says itself."""
    present = notes_refs(cwd)
    if not commits or not present:
        return {}  # the usual case: `why` starts no process and imports nothing for it
    from git_obversa.attribution import agent_trace, git_ai

    logs = notes(commits, GIT_AI_REF, cwd) if GIT_AI_REF in present else {}
    traces = notes(commits, AGENT_TRACE_REF, cwd) if AGENT_TRACE_REF in present else {}
    found: dict[str, list[dict]] = {}
    for commit, paths in commits.items():
        paths = list(paths)
        agents: dict[str, dict] = {}
        if commit in logs:
            try:
                log = git_ai.parse(logs[commit])
            except git_ai.NoteError:
                log = git_ai.AuthorshipLog()
            for path in paths:
                for author in log.authors(path):
                    if author.kind == "ai":
                        agents.setdefault(
                            author.key,
                            {
                                "agent": author.tool,
                                "model": author.model,
                                "session": author.key,
                                "contributor": "ai",
                            },
                        )
        if commit in traces:
            try:
                conversations = agent_trace.parse(traces[commit])
            except agent_trace.RecordError:
                conversations = {}
            for path in paths:
                for item in conversations.get(path, []):
                    if item.contributor == "human" or not (item.tool or item.model):
                        continue  # a person's, or nobody known's: no agent to name
                    key = git_ai.session_id(item.tool, item.session) if item.tool else ""
                    agents.setdefault(
                        key or f"{item.model}:{len(agents)}",
                        {
                            "agent": item.tool,
                            "model": item.model,
                            "session": key,
                            "contributor": item.contributor,
                        },
                    )
        if agents:
            found[commit] = list(agents.values())
    return found


def describe(agent: dict) -> str:
    """One agent as `why` prints it: `claude-code (claude-sonnet-4-5), session s_…`. The
    names come from notes anyone may have written: shown printable and bounded."""
    name, model, session = (_shown(agent[key]) for key in ("agent", "model", "session"))
    text = name or "an agent"
    text += f" ({model})" if model else ""
    text += f", session {session}" if session else ""
    if agent["contributor"] != "ai":
        text += f" ({agent['contributor']}: a person may have written some of these lines)"
    return text


def _shown(value: str, limit: int = 120) -> str:
    """VALUE with what is not printable (terminal escapes, line breaks) as "?", cut at
    LIMIT characters."""
    text = "".join(char if char.isprintable() else "?" for char in value[: limit + 1])
    return text if len(text) <= limit else text[: limit - 1] + "…"
