"""The whole record of a commit, kept beside the repository and found from the commit.

The message carries the concise why; every turn captured for that commit (scrubbed, each
bounded as `record.rules.bound_turns` bounds it) is kept here, under a random id that the
message carries as a trailer, `Obversa-Record-Id: <16 hex digits>`. The id travels with
the message, so the record is found again after `commit --amend`, `rebase` (reword,
squash: both ids stay in the message), `cherry-pick` and any rewrite that keeps the message;
notes keyed by the commit's hash would not survive a cherry-pick (docs/reasoning.md).

Storage: the ref RECORDS_REF points at a commit without parents (fixed author and date,
so the same records give the same commit on every machine) whose tree holds

    <id[:2]>/<id[2:]>           one record: JSON, see `prepare_record`
    dropped/<id[:2]>/<id[2:]>   an empty blob: the record was dropped on purpose; a sync
                                never brings it back
    commits/<sha[:2]>/<sha[2:]> the ids a rewritten commit inherited that its message no
                                longer names (one a line): `commit --amend -m`, a
                                `fixup` in `rebase -i` (the `post-rewrite` hook, `link`)

The ref is the only thing that keeps them: no branch, index or worktree is touched, and
`git gc` keeps what the ref reaches (a dropped record is pruned with the next gc).

How a record gets there: the commit hooks claim the pending turns (record/turns.py) and,
once the commit has the id in its message, `post-commit` renames claimed.jsonl to
`kept-<id>.jsonl` in the store (a file operation in `sh`: the commit starts no Python).
`settle` turns those files into records — scrubbed and bounded in Python, then written —
the next time any git-obversa command that reads or captures records runs here.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable

from git_obversa.record.message import ID_TRAILER
from git_obversa.repo import exchange, git

RECORDS_REF = "refs/obversa/records/v1"
RECORD_FORMAT = "git-obversa record 1"
KEPT_PREFIX = "kept-"
KEPT_SUFFIX = ".jsonl"
DROPPED = "dropped"
COMMITS = "commits"
# The records commit's author and date never change: equal trees give equal commits.
_IDENTITY = {
    "GIT_AUTHOR_NAME": "git-obversa",
    "GIT_AUTHOR_EMAIL": "records@git-obversa.invalid",
    "GIT_AUTHOR_DATE": "@0 +0000",
    "GIT_COMMITTER_NAME": "git-obversa",
    "GIT_COMMITTER_EMAIL": "records@git-obversa.invalid",
    "GIT_COMMITTER_DATE": "@0 +0000",
}
_ID = re.compile(r"[0-9a-f]{16}")
_ID_LINE = re.compile(rf"^[ \t]*{ID_TRAILER}[ \t]*:[ \t]*([0-9a-f]{{16}})[ \t]*$", re.MULTILINE)


class RecordError(Exception):
    """The kept records cannot be read or written as asked; the text says what to do."""


def new_id() -> str:
    """A fresh record id: 16 random hex digits."""
    return os.urandom(8).hex()


def is_id(text: str) -> bool:
    return bool(_ID.fullmatch(text))


def record_ids(message: str) -> list[str]:
    """The record ids a commit MESSAGE carries, in order, each once. Every trailer line
    counts, not only the last paragraph's: a squash keeps each squashed message's."""
    return list(dict.fromkeys(_ID_LINE.findall(message)))


def _path(record_id: str) -> str:
    return f"{record_id[:2]}/{record_id[2:]}"


def prepare_record(record_id: str, turns: list[dict]) -> dict:
    """The record kept for TURNS (raw pending turns, oldest first, streamed blocks
    joined): each turn scrubbed (together with its neighbours, so a secret split between
    two goes too) and bounded on its own, with its kind, stage, node and whatever
    metadata the capture gave (agent, model, session, time)."""
    from git_obversa.record.rules import bound_turns
    from git_obversa.record.turns import ABOUT

    texts = bound_turns([turn["text"] for turn in turns])
    kept = []
    for turn, text in zip(turns, texts, strict=True):
        entry = {"seq": turn["seq"], "stage": turn["stage"], "node": turn["node"]}
        entry["kind"] = turn["kind"]
        entry.update({key: turn[key] for key in ABOUT if turn.get(key) is not None})
        entry["text"] = text
        kept.append(entry)
    return {"format": RECORD_FORMAT, "id": record_id, "turns": kept}


def _valid(record: object, record_id: str) -> bool:
    return (
        isinstance(record, dict)
        and record.get("format") == RECORD_FORMAT
        and record.get("id") == record_id
        and isinstance(record.get("turns"), list)
        and all(
            isinstance(turn, dict) and isinstance(turn.get("text"), str) for turn in record["turns"]
        )
    )


# ---------------------------------------------------------------------------------------
# Settling: the claimed turns of commits made become records


def kept_files(directories: Iterable[str]) -> list[tuple[str, str]]:
    """(record id, path) of every `kept-<id>.jsonl` waiting in the stores DIRECTORIES."""
    found = []
    for directory in directories:
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in sorted(names):
            record_id = name[len(KEPT_PREFIX) : -len(KEPT_SUFFIX)]
            if name.startswith(KEPT_PREFIX) and name.endswith(KEPT_SUFFIX) and is_id(record_id):
                found.append((record_id, os.path.join(directory, name)))
    return found


def store_directories(cwd: str | os.PathLike[str] | None = None) -> list[str]:
    """The turn store of this worktree (each worktree has its own, and settles its own)."""
    from git_obversa.record.pending import STORE_PATH

    return [os.fspath(git.git_path(STORE_PATH, cwd))]


def settle(cwd: str | os.PathLike[str] | None = None) -> list[str]:
    """Turn every `kept-<id>.jsonl` of this worktree into a record (see the module
    docstring); the ids settled. A file that is not turns stays for a look."""
    from git_obversa.record.pending import StoreLock
    from git_obversa.record.turns import CorruptTurns, read_turn_file

    waiting = kept_files(store_directories(cwd))
    if not waiting:
        return []
    records: dict[str, bytes] = {}
    for record_id, path in waiting:
        with StoreLock(os.path.dirname(path)):
            try:
                turns = read_turn_file(path)
            except CorruptTurns:
                continue
        existing = read_records([record_id], cwd, settled=True).get(record_id)
        if existing is not None:  # an amend of the same composition: keep both
            known = {turn["seq"] for turn in existing["turns"]}
            turns = [turn for turn in turns if turn["seq"] not in known]
            record = existing
            record["turns"] += prepare_record(record_id, turns)["turns"]
        else:
            record = prepare_record(record_id, turns)
        records[record_id] = _encode(record)
    write_records(records, cwd)
    for record_id, path in waiting:
        if record_id in records:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass  # a capture running beside this one settled it too
    return list(records)


def keep_now(record_id: str, turns: list[dict], cwd=None) -> None:
    """Write the record of TURNS under RECORD_ID at once (a commit made without the hooks'
    claim, as an isolated stage's)."""
    write_records({record_id: _encode(prepare_record(record_id, turns))}, cwd)


def _encode(record: dict) -> bytes:
    return (json.dumps(record, ensure_ascii=False, indent=1) + "\n").encode("utf-8")


# ---------------------------------------------------------------------------------------
# The records ref


def _entries(tip: str | None, cwd) -> dict[str, str]:
    """path -> blob of every entry in the records tree at TIP."""
    if tip is None:
        return {}
    listed = git.run(["ls-tree", "-r", "-z", tip], cwd).stdout
    entries = {}
    for item in listed.split("\0"):
        if item:
            info, _, path = item.partition("\t")
            entries[path] = info.split()[2]
    return entries


def _hash_blobs(contents: dict[str, bytes], cwd) -> dict[str, str]:
    """Write CONTENTS (key -> bytes) as blobs; key -> blob id."""
    if not contents:
        return {}
    import tempfile

    with tempfile.TemporaryDirectory(prefix="obversa-records-") as scratch:
        paths = []
        for number, data in enumerate(contents.values()):
            path = os.path.join(scratch, str(number))
            with open(path, "wb") as handle:
                handle.write(data)
            paths.append(path)
        written = git.run(
            ["hash-object", "-w", "--no-filters", "--stdin-paths"], cwd, input="\n".join(paths)
        ).stdout.split()
    return dict(zip(contents, written, strict=True))


def _commit_entries(entries: dict[str, str], cwd) -> str:
    """A parentless records commit whose tree holds ENTRIES (path -> blob)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="obversa-records-") as scratch:
        env = {**os.environ, "GIT_INDEX_FILE": os.path.join(scratch, "records.idx"), **_IDENTITY}
        listing = "".join(f"100644 blob {blob}\t{path}\n" for path, blob in sorted(entries.items()))
        git.run(["update-index", "--add", "--index-info"], cwd, input=listing, env=env)
        tree = git.run(["write-tree"], cwd, env=env).stdout.strip()
        made = git.run(["commit-tree", tree, "-m", "git-obversa records"], cwd, env=env)
        return made.stdout.strip()


def _update(cwd, change, ref: str = RECORDS_REF) -> dict[str, str]:
    """Apply CHANGE (entries -> entries) to the records at REF, compare-and-swap, retried
    when another writer got there first; the entries written."""
    for _ in range(16):
        tip = exchange.tip(ref, cwd)
        entries = change(dict(_entries(tip, cwd)))
        if tip is not None and entries == _entries(tip, cwd):
            return entries
        new = _commit_entries(entries, cwd)
        moved = git.run(["update-ref", ref, new, tip or "0" * 40], cwd, check=False)
        if moved.returncode == 0:
            return entries
    raise RecordError(f"{ref} kept changing under this update; run the command again")


def write_records(records: dict[str, bytes], cwd=None) -> None:
    """Add RECORDS (id -> encoded record) to the records ref; a dropped id stays dropped."""
    if not records:
        return
    blobs = _hash_blobs(records, cwd)

    def change(entries: dict[str, str]) -> dict[str, str]:
        for record_id, blob in blobs.items():
            if f"{DROPPED}/{_path(record_id)}" not in entries:
                entries[_path(record_id)] = blob
        return entries

    _update(cwd, change)


def commit_ids(commit: str, message: str, cwd=None) -> list[str]:
    """The record ids of COMMIT: those its MESSAGE names, then those it inherited from
    commits it was rewritten from (`link`)."""
    return commits_ids([(commit, message)], cwd)[commit]


def commits_ids(commits: list[tuple[str, str]], cwd=None) -> dict[str, list[str]]:
    """`commit_ids` of each (commit, message) of COMMITS, with one git process."""
    found = {commit: record_ids(message) for commit, message in commits}
    if exchange.tip(RECORDS_REF, cwd) is None or not commits:
        return found
    shas = list(found)
    wanted = "".join(f"{RECORDS_REF}:{COMMITS}/{sha[:2]}/{sha[2:]}\n" for sha in shas)
    listed = git.run(["cat-file", "--batch"], cwd, input=wanted.encode()).stdout
    for sha, (fields, content) in zip(shas, git.batch_records(listed), strict=True):
        if len(fields) == 3:
            inherited = content.decode("ascii", "replace").split()
            found[sha] += [i for i in inherited if is_id(i) and i not in found[sha]]
    return found


def link(pairs: list[tuple[str, str]], cwd=None) -> int:
    """After a rewrite (PAIRS of old and new commit, as git gives its `post-rewrite`
    hook): each new commit inherits the record ids of its old ones that its message no
    longer names. Returns how many links were written."""
    shas = list(dict.fromkeys(sha for pair in pairs for sha in pair))
    if not shas:
        return 0
    listed = git.run(["log", "--no-walk=unsorted", "-z", "--format=%H%n%B", *shas], cwd).stdout
    messages = {}
    for entry in listed.split("\0"):
        sha, _, message = entry.strip("\n").partition("\n")
        if sha:
            messages[sha] = message
    inherited: dict[str, list[str]] = {}
    for old, new in pairs:
        have = set(record_ids(messages.get(new, ""))) | set(inherited.get(new, []))
        for record_id in commit_ids(old, messages.get(old, ""), cwd):
            if record_id not in have:
                inherited.setdefault(new, []).append(record_id)
                have.add(record_id)
    if not inherited:
        return 0
    blobs = _hash_blobs(
        {new: "".join(f"{i}\n" for i in ids).encode() for new, ids in inherited.items()}, cwd
    )

    def change(entries: dict[str, str]) -> dict[str, str]:
        for new, blob in blobs.items():
            entries[f"{COMMITS}/{new[:2]}/{new[2:]}"] = blob
        return entries

    _update(cwd, change)
    return len(inherited)


def read_records(ids: list[str], cwd=None, *, settled: bool = False) -> dict[str, dict]:
    """The records of IDS that are kept here (id -> record), settling first unless
    SETTLED. A record that is not what this version wrote raises RecordError."""
    if not settled:
        settle(cwd)
    if not ids or exchange.tip(RECORDS_REF, cwd) is None:
        return {}
    wanted = "".join(f"{RECORDS_REF}:{_path(record_id)}\n" for record_id in ids)
    found = git.run(["cat-file", "--batch"], cwd, input=wanted.encode()).stdout
    records = {}
    for record_id, (fields, content) in zip(ids, git.batch_records(found), strict=True):
        if len(fields) != 3:
            continue
        try:
            record = json.loads(content.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            record = None
        if not _valid(record, record_id):
            raise RecordError(
                f"the kept record {record_id} in {RECORDS_REF} is damaged; "
                f"`git obversa record drop --id {record_id}` removes it"
            )
        records[record_id] = record
    return records


def drop_records(ids: list[str], cwd=None) -> list[str]:
    """Drop the records of IDS for good: removed from the ref, with a tombstone so that
    no sync brings them back; the ids that were kept here."""
    settle(cwd)
    tombstone = _hash_blobs({"": b""}, cwd)[""]
    dropped: list[str] = []

    def change(entries: dict[str, str]) -> dict[str, str]:
        dropped.clear()
        for record_id in ids:
            if entries.pop(_path(record_id), None) is not None:
                dropped.append(record_id)
            entries[f"{DROPPED}/{_path(record_id)}"] = tombstone
        return entries

    _update(cwd, change)
    # What we last saw of each remote still holds it: forgotten, so gc can prune it now
    # (the next sync fetches what the remote has, and the tombstone wins).
    listed = git.output(["for-each-ref", "--format=%(refname)", "refs/obversa-remote/"], cwd)
    for ref in listed.splitlines():
        if ref.endswith("/records/v1"):
            git.run(["update-ref", "-d", ref], cwd)
    return dropped


def merged(ours: dict[str, str], theirs: dict[str, str]) -> dict[str, str]:
    """The union of two records trees: every record either side keeps, unless either
    side dropped it."""
    entries = {**theirs, **ours}
    for path in list(entries):
        if path.startswith(f"{DROPPED}/"):
            entries.pop(path.removeprefix(f"{DROPPED}/"), None)
    return entries


# ---------------------------------------------------------------------------------------
# Travelling: a remote's records merged with ours, then ours pushed


def _is_record_path(path: str) -> bool:
    return not path.startswith((f"{DROPPED}/", f"{COMMITS}/"))


def tracking_ref(remote: str) -> str:
    return f"refs/obversa-remote/{remote}/records/v1"


def sync(remote: str, cwd=None) -> dict:
    """Fetch REMOTE's records, merge them into ours (`merged`), and push the result,
    leased on what was fetched (retried if REMOTE moved meanwhile). Returns {"remote",
    "records": how many are kept here now, "received", "sent"}."""
    settle(cwd)

    def merge(ref: str, theirs_tip: str | None) -> str | None:
        theirs = _entries(theirs_tip, cwd)
        _update(cwd, lambda entries: merged(entries, theirs), ref)
        return exchange.tip(ref, cwd)

    try:
        tips = exchange.exchange(
            remote, {RECORDS_REF: tracking_ref(remote)}, merge, cwd, what="records"
        )
    except exchange.ExchangeError as error:
        raise RecordError(str(error)) from error
    before, theirs_tip, tip = tips[RECORDS_REF]
    had, theirs, ours = (_entries(commit, cwd) for commit in (before, theirs_tip, tip))
    received = len([path for path in ours if path not in had and _is_record_path(path)])
    sent = 0
    if tip is not None and tip != theirs_tip:
        sent = len([path for path in ours if path not in theirs and _is_record_path(path)])
    kept = len([path for path in ours if _is_record_path(path)])
    return {"remote": remote, "records": kept, "received": received, "sent": sent}
