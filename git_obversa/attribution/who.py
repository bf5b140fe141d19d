"""Who wrote a commit's lines, read back from the notes: a Git AI authorship log under
`refs/notes/ai` and an Agent Trace record under `refs/notes/agent-trace`, whether
git-obversa wrote them or another tool did."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from git_obversa.attribution import agent_trace, git_ai
from git_obversa.repo import git


def notes(
    commits: Iterable[str], ref: str, cwd: str | os.PathLike[str] | None = None
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


def agents_of(
    commits: Mapping[str, Iterable[str]], cwd: str | os.PathLike[str] | None = None
) -> dict[str, list[dict]]:
    """{commit: the agents that wrote its lines in those PATHS}, each {"agent", "model",
    "session", "contributor"}, for COMMITS ({commit: paths}); commits with none left out.
    A Git AI attestation names an `ai` author; an Agent Trace conversation says itself."""
    logs = notes(commits, git_ai.NOTES_REF, cwd)
    traces = notes(commits, agent_trace.NOTES_REF, cwd)
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
                    if item.contributor == "human":
                        continue
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
    """One agent as `why` prints it: `claude-code (claude-sonnet-4-5), session s_…`."""
    text = agent["agent"] or "an agent"
    text += f" ({agent['model']})" if agent["model"] else ""
    text += f", session {agent['session']}" if agent["session"] else ""
    if agent["contributor"] != "ai":
        text += f" ({agent['contributor']}: a person may have written some of these lines)"
    return text
