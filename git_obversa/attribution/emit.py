"""After a commit that carried agent turns: the notes of who wrote its lines.

Opt-in per repository: `git config obversa.attribution git-ai,agent-trace` (either or
both). `prepare-commit-msg` leaves the marker ATTRIBUTE beside its claim when the setting
is there, so `post-commit` starts this only then; without the setting nothing of this
package is imported on the commit path.

What is claimed: git-obversa hears what an agent said, not who typed each line. The lines
a commit added are the agent's (`ai`, attested to its Git AI session) only when every turn
the commit carries comes from one agent session; a turn with no agent (a note written by
hand, a capture that did not say who) or turns of several sessions make them `mixed` in
the Agent Trace record and untracked (no attestation) in the Git AI note, whose metadata
still names the sessions. Edits made by hand while the agent worked are not seen.

A commit made from others (an amend, a rebase's pick, squash or fixup: `carry`, which
post-rewrite starts; a cherry-pick: `attribute` with PICKED, from post-commit) gets notes
over its own lines: each line keeps the claim of the same line in the commits it was made
from, and a line found in none of them is claimed by nobody (`claims.inherit`).
"""

from __future__ import annotations

import os
import sys

from git_obversa.attribution import agent_trace, claims, git_ai
from git_obversa.attribution.lines import added_text
from git_obversa.repo import git

CONFIG = "obversa.attribution"
FORMATS = {"git-ai": git_ai.NOTES_REF, "agent-trace": agent_trace.NOTES_REF}
# Left in the turn store with the claim when CONFIG is set (see the hooks).
ATTRIBUTE_MARKER = "attribute"
NOTES_REFS = (git_ai.NOTES_REF, agent_trace.NOTES_REF)
# Who wrote the notes commits: fixed, so writing notes needs no identity configured.
NOTES_COMMITTER = "git-obversa <notes@git-obversa.invalid>"
REWRITE_SETTINGS = {"notes.rewrite.amend": "true", "notes.rewrite.rebase": "true"}


def formats(value: str) -> list[str]:
    """The formats a CONFIG value names ("git-ai,agent-trace"), in FORMATS order;
    ValueError naming what is not one."""
    names = {name.strip().lower() for name in value.replace(",", " ").split()}
    if names & {"false", "no", "off", "none"}:
        return []
    unknown = names - set(FORMATS) - {"true", "all"}
    if unknown:
        raise ValueError(
            f"{CONFIG} names {', '.join(sorted(unknown))}; it lists git-ai and/or agent-trace"
        )
    everything = bool(names & {"true", "all"})
    return [name for name in FORMATS if everything or name in names]


def attribute(
    turns: list[dict],
    wanted: list[str],
    cwd: str | os.PathLike[str] | None = None,
    picked: str | None = None,
    commit: str | None = None,
) -> list[str]:
    """Write the WANTED formats' notes on COMMIT (HEAD when None), said by TURNS (the
    turns it carried); the notes refs written. The lines it took from the commit HEAD
    amended, or from PICKED (the commit it was cherry-picked from), keep the claims that
    commit's notes make; an amended commit's notes go (else git would append them to
    these)."""
    if not wanted:
        return []
    [(_, entries)] = git.outputs([["log", "-g", "-2", "--format=%H%x00%ae%x00%gs", "HEAD"]], cwd)
    reflog = [line.split("\0") for line in entries.decode("utf-8", "replace").splitlines()]
    if commit is not None and commit != reflog[0][0]:
        reflog = [[commit, git.output(["log", "-1", "--format=%ae", commit], cwd), ""]]
    commit, human, action = reflog[0]
    amended = reflog[1][0] if action.startswith("commit (amend)") and len(reflog) > 1 else None
    sources = [picked] if picked else [amended] if amended else []
    sessions, unknown = claims.sessions_of(turns)
    otherwise = claims.said_by(sessions, unknown)
    refs = [FORMATS[name] for name in wanted]
    written = _rewrite({commit: sources}, {commit: human}, otherwise, refs, cwd)
    if written and amended:
        for ref in refs:
            git.run(["notes", "--ref", ref, "remove", "--ignore-missing", amended], cwd)
    configure(cwd)
    return refs if written else []


def carry(
    pairs: list[tuple[str, str]], wanted: list[str], cwd: str | os.PathLike[str] | None = None
) -> int:
    """After `commit --amend` or `rebase` (PAIRS of old and new commit, as git gives its
    post-rewrite hook): each new commit's notes say who wrote the lines it adds, from the
    notes of the commits it was made from (git copies notes as they were, line numbers
    and all, and a squash's glued together). A new commit whose notes were written for it
    (an amend's, in post-commit) is left alone. Returns how many commits got notes."""
    sources: dict[str, list[str]] = {}
    for old, new in pairs:
        sources.setdefault(new, []).append(old)
    texts = _notes(list(sources), cwd)
    fresh = {
        new: olds
        for new, olds in sources.items()
        if not claims.written_for(new, *(texts[ref].get(new) for ref in NOTES_REFS))
    }
    if not fresh:
        return 0
    [(_, listed)] = git.outputs([["log", "--no-walk=unsorted", "--format=%H %ae", *fresh]], cwd)
    humans = {}
    for line in listed.decode("utf-8", "replace").splitlines():
        commit, _, email = line.partition(" ")
        humans[commit] = email
    return len(_rewrite(fresh, humans, (), [FORMATS[name] for name in wanted], cwd))


def _notes(commits: list[str], cwd) -> dict[str, dict[str, str]]:
    """{notes ref: {commit: its note}} of COMMITS, under both refs."""
    from git_obversa.attribution.who import notes

    return {ref: notes(commits, ref, cwd) for ref in NOTES_REFS}


def _rewrite(
    sources: dict[str, list[str]],
    humans: dict[str, str],
    otherwise: tuple[claims.Claim, ...],
    refs: list[str],
    cwd,
) -> list[str]:
    """Write REFS' notes on each commit of SOURCES ({commit: the commits it was made
    from}): a line it took from them keeps their notes' claim, the others get OTHERWISE.
    A commit with nothing to say (no claim, no source with notes) gets none. Returns the
    commits written."""
    olds = list(dict.fromkeys(old for group in sources.values() for old in group))
    texts = _notes(olds, cwd) if olds else {ref: {} for ref in NOTES_REFS}
    added = added_text(list(dict.fromkeys([*sources, *olds])), cwd)
    said = {old: claims.claims_in(*(texts[ref].get(old) for ref in NOTES_REFS)) for old in olds}
    written: dict[str, dict[str, str]] = {ref: {} for ref in refs}
    for commit, group in sources.items():
        lines = claims.inherit(
            added.get(commit, {}),
            [(added.get(old, {}), said[old] or {}) for old in group],
            otherwise,
        )
        if not claims.sessions_in(lines) and all(said[old] is None for old in group):
            continue
        notes = claims.notes_for(commit, lines, humans.get(commit, ""))
        for ref in refs:
            written[ref][commit] = notes[ref]
    for ref, texts in written.items():
        _store(ref, texts, cwd)
    return list(written[refs[0]]) if refs else []


def _store(ref: str, texts: dict[str, str], cwd) -> None:
    """Put TEXTS ({commit: note}) under the notes REF, replacing what they had, in one
    notes commit on top of REF (`git fast-import`, which lays the notes out as git does;
    it refuses, and this raises, if REF moved meanwhile)."""
    if not texts:
        return
    [(status, tip)] = git.outputs([["rev-parse", "-q", "--verify", f"{ref}^{{commit}}"]], cwd)
    stream = bytearray(f"commit {ref}\ncommitter {NOTES_COMMITTER} now\n".encode())
    stream += _data("Notes added by git-obversa")
    if status == 0:
        stream += b"from " + tip.strip() + b"\n"
    for commit, text in texts.items():
        stream += f"N inline {commit}\n".encode() + _data(text)
    git.run(["fast-import", "--quiet", "--date-format=now"], cwd, input=bytes(stream))


def _data(text: str) -> bytes:
    raw = text.encode("utf-8")
    return f"data {len(raw)}\n".encode() + raw + b"\n"


def configure(cwd: str | os.PathLike[str] | None = None) -> list[str]:
    """Have git carry the notes across amend and rebase (`notes.rewriteRef`); the refs
    that were added to it."""
    [(_, listed)] = git.outputs([["config", "--get-all", "notes.rewriteRef"]], cwd)
    present = set(listed.decode("utf-8", "replace").split())
    missing = [ref for ref in FORMATS.values() if ref not in present]
    if not missing:
        return []
    for ref in missing:
        git.run(["config", "--add", "notes.rewriteRef", ref], cwd)
    for key, value in REWRITE_SETTINGS.items():
        git.run(["config", key, value], cwd)
    return missing


def enable(value: str, cwd: str | os.PathLike[str] | None = None) -> dict[str, list[str]]:
    """Ask for the formats VALUE names from the next commit on (`install --attribution`);
    {config key: values set}. ValueError when VALUE names no format."""
    wanted = formats(value)
    if not wanted:
        raise ValueError(f"name the formats for {CONFIG}: git-ai and/or agent-trace")
    git.run(["config", CONFIG, ",".join(wanted)], cwd)
    added = configure(cwd)
    return {CONFIG: [",".join(wanted)], **({"notes.rewriteRef": added} if added else {})}


def configured(cwd: str | os.PathLike[str] | None = None) -> list[str]:
    """The formats CONFIG asks for here ([] when it is unset); ValueError when it names
    what is not one."""
    [(_, value)] = git.outputs([["config", "--get", CONFIG]], cwd)
    return formats(value.decode("utf-8", "replace"))


def run(store: str | os.PathLike[str], cwd: str | os.PathLike[str] | None = None) -> None:
    """Write the configured notes on HEAD from the turns claimed in the turn store
    directory STORE, and drop its ATTRIBUTE marker. Fails open: one warning line."""
    from git_obversa.record.turns import TurnStore

    turns = TurnStore(store)
    try:
        wanted = configured(cwd)
        if wanted:
            attribute(turns.read_claimed(), wanted, cwd)
    except Exception as error:  # a broken note never costs the commit
        print(f"warning: git-obversa wrote no attribution notes: {error}", file=sys.stderr)
    finally:
        (turns.directory / ATTRIBUTE_MARKER).unlink(missing_ok=True)
