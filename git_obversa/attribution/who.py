"""Who wrote a commit's lines, read back from the notes: a Git AI authorship log under
`refs/notes/ai` and an Agent Trace record under `refs/notes/agent-trace`, whether
git-obversa wrote them or another tool did.

The one rule for every front end (`why`, `blame`, the MCP `why`, the web view): a line
blame gives to a commit is written by the agents whose claims in that commit's notes
cover the line as numbered in that commit (`blame.lookup`'s ORIGINS); a line no claim
covers names no agent. On `why`'s path: nothing runs, and nothing more than the lookup
has loaded is imported, until a notes ref is there."""

import os

from git_obversa.attribution import AGENT_TRACE_REF, GIT_AI_REF
from git_obversa.repo import git, location, refs

TYPE_CHECKING = False  # `typing` and friends only for type checkers
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    # {commit: {path: [(line ranges, (session, contributor), agent dict), ...]}}
    Claims = dict[str, dict[str, list[tuple[list[tuple[int, int]], tuple[str, str], dict]]]]


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


def wanted(cwd: str | os.PathLike[str] | None = None) -> list | None:
    """A list for `blame.lookup` to fill as ORIGINS when this repository has notes that
    may name who wrote lines (then `attach` reads it), else None: nothing more runs."""
    return [] if notes_refs(cwd) else None


def attach(
    commits: "Mapping[str, dict]",
    origins: "list[tuple[int, str, str, int]] | None",
    cwd: str | os.PathLike[str] | None = None,
) -> None:
    """Set on each of COMMITS (`blame.lookup`'s answer) the agents whose claims cover
    the lines asked, as numbered in the commit (ORIGINS, as `lookup` filled it): its
    "agents", each {"agent", "model", "session", "contributor", "lines"} (the lines now,
    [first, last] ranges), and its "unattributed" lines, which the commit's notes give
    to no agent; both empty for a commit without notes (lines not committed yet among
    them)."""
    for commit in commits.values():
        commit["agents"], commit["unattributed"] = [], []
    if not origins:
        return
    present = notes_refs(cwd)
    asked: dict[str, list[tuple[int, str, int]]] = {}
    for number, sha, path, then in origins:
        if sha in commits and sha.strip("0"):
            asked.setdefault(sha, []).append((number, path, then))
    for sha, (covered, uncovered) in _by_line(asked, present, cwd).items():
        commits[sha]["agents"] = covered
        commits[sha]["unattributed"] = uncovered


def said(commit: dict) -> list[str]:
    """What `why` prints, an `Agent:` line each, of who wrote COMMIT's lines asked
    (`attach` set them): the agent alone when one wrote them all; else which lines
    are whose, and which the notes give to no agent."""
    agents, unattributed = commit.get("agents", ()), commit.get("unattributed", ())
    if len(agents) == 1 and not unattributed:
        return [describe(agents[0])]
    if not agents:
        return ["not attributed"] if unattributed else []
    texts = [f"{_numbers(agent['lines'])}: {describe(agent)}" for agent in agents]
    return texts + ([f"{_numbers(unattributed)}: not attributed"] if unattributed else [])


def writers(commits: "Mapping[str, dict]") -> dict[int, str] | None:
    """{line now: the agents that wrote it, by name ("claude-code", "a+b" for several)}
    over COMMITS (`attach` set them), for a column beside each line; None when no commit
    has notes (then there is no column to show)."""
    if not any(commit.get("agents") or commit.get("unattributed") for commit in commits.values()):
        return None
    names: dict[int, list[str]] = {}
    for commit in commits.values():
        for agent in commit["agents"]:
            name = _shown(agent["agent"] or agent["model"] or "an agent", 40)
            for first, last in agent["lines"]:
                for number in range(first, last + 1):
                    names.setdefault(number, []).append(name)
    return {number: "+".join(dict.fromkeys(found)) for number, found in names.items()}


def agents_of(
    commits: "Mapping[str, Iterable[str]]", cwd: str | os.PathLike[str] | None = None
) -> dict[str, list[dict]]:
    """{commit: the agents that wrote its lines in those PATHS}, each {"agent", "model",
    "session", "contributor"}, for COMMITS ({commit: paths}); commits with none left out."""
    present = notes_refs(cwd)
    if not commits or not present:
        return {}  # the usual case: no process started, nothing imported for it
    found: dict[str, list[dict]] = {}
    for commit, lines in _claims(list(commits), present, cwd).items():
        agents: dict[tuple[str, str], dict] = {}
        for path in commits[commit]:
            for _, key, agent in lines.get(path, ()):
                agents.setdefault(key, agent)
        if agents:
            found[commit] = list(agents.values())
    return found


def _by_line(
    asked: dict[str, list[tuple[int, str, int]]],
    present: list[str],
    cwd: str | os.PathLike[str] | None,
) -> dict[str, tuple[list[dict], list[list[int]]]]:
    """{commit: (its agents, each with the "lines" now it wrote, the lines now its notes
    give to no agent)} for the commits of ASKED ({commit: [(line now, path then, line
    then)]}) that have notes."""
    from git_obversa.attribution.lines import to_ranges

    def runs(numbers: list[int]) -> list[list[int]]:
        return [list(run) for run in to_ranges(numbers)]

    found = {}
    for commit, lines in _claims(list(asked), present, cwd).items():
        agents: dict[tuple[str, str], dict] = {}
        numbers: dict[tuple[str, str], list[int]] = {}
        unattributed: list[int] = []
        for number, path, then in asked[commit]:
            claimed = set()  # both notes may claim a line for one session
            for ranges, key, agent in lines.get(path, ()):
                if key not in claimed and any(a <= then <= b for a, b in ranges):
                    agents.setdefault(key, agent)
                    numbers.setdefault(key, []).append(number)
                    claimed.add(key)
            if not claimed:
                unattributed.append(number)
        covered = [{**agent, "lines": runs(numbers[key])} for key, agent in agents.items()]
        found[commit] = (covered, runs(unattributed))
    return found


def _claims(commits: list[str], present: list[str], cwd: str | os.PathLike[str] | None) -> "Claims":
    """The agents each line of COMMITS is claimed by, in the notes of either format
    (both read: another tool may have written one of them); commits with no readable
    note left out. A Git AI attestation names an `ai` author; an Agent Trace
    conversation says `ai` or `mixed` itself (`human` and `unknown` name no agent)."""
    from git_obversa.attribution import agent_trace, git_ai

    logs = notes(commits, GIT_AI_REF, cwd) if GIT_AI_REF in present else {}
    traces = notes(commits, AGENT_TRACE_REF, cwd) if AGENT_TRACE_REF in present else {}
    found: Claims = {}
    for commit in commits:
        if commit in logs:
            try:
                log = git_ai.parse(logs[commit])
            except git_ai.NoteError:
                log = None
            if log is not None:
                found.setdefault(commit, {})
                for path, entries in log.files.items():
                    for key, ranges in entries:
                        author = log.author(key)
                        if author is None or author.kind != "ai":
                            continue  # a person's, or a key the note does not explain
                        agent = _agent(author.tool, author.model, author.key, "ai")
                        found[commit].setdefault(path, []).append(
                            (list(ranges), (author.key, "ai"), agent)
                        )
        if commit in traces:
            try:
                conversations = agent_trace.parse(traces[commit])
            except agent_trace.RecordError:
                continue
            found.setdefault(commit, {})
            for path, items in conversations.items():
                for item in items:
                    if item.contributor not in ("ai", "mixed") or not (item.tool or item.model):
                        continue  # a person's, or nobody known's: no agent to name
                    known = item.tool and item.session
                    session = git_ai.session_id(item.tool, item.session) if known else ""
                    agent = _agent(item.tool, item.model, session, item.contributor)
                    key = (session or f"{item.tool}:{item.model}", item.contributor)
                    found[commit].setdefault(path, []).append((list(item.ranges), key, agent))
    return found


def _agent(tool: str, model: str, session: str, contributor: str) -> dict:
    return {"agent": tool, "model": model, "session": session, "contributor": contributor}


def _numbers(runs: "Iterable[list[int]]") -> str:
    """`line 4`, `lines 4-9` or `lines 4-9, 12` for [first, last] RUNS."""
    runs = list(runs)
    text = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)
    return ("line " if len(runs) == 1 and runs[0][0] == runs[0][1] else "lines ") + text


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
