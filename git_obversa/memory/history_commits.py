"""The history of a scope: a commit per state, on the scope's history ref.

Every move of a scope ref through the store also appends a commit to the scope's history
ref (`record_history`; `FileStore.move_scope` and `update_refs` do it within their own
locking). A history commit's tree is the scope's tree, or the empty tree with the trailer
ABSENT_TRAILER when the scope was dropped; its message's first line is the action. The
format is documented in docs/memory.md.
"""

import time

from git_obversa.memory.ref_names import HEX, history_ref
from git_obversa.memory.store_errors import MissingObject, StoreError, notify
from git_obversa.repo import reflog
from git_obversa.repo.locks import pause

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

HISTORY_IDENTITY = b"git-obversa <git-obversa@localhost>"
ABSENT_TRAILER = "Obversa-State: absent"  # a history state in which the scope was dropped
RECENT_STATES = 8  # how far back a writer looks for a state a concurrent writer recorded
MAX_HISTORY_ATTEMPTS = 64
HISTORY_COMMIT_CAP = 65536  # our history commits are a few hundred bytes


def history_commit(store: "Any", tree: str | None, parent: str | None, action: str) -> str:
    """Write the commit recording one state of a scope: TREE (None: the scope was absent)."""
    headers = [b"tree " + (tree or store.write_object("tree", b"")).encode("ascii")]
    if parent is not None:
        headers.append(b"parent " + parent.encode("ascii"))
    stamp = b"%s %d +0000" % (HISTORY_IDENTITY, int(time.time()))
    headers += [b"author " + stamp, b"committer " + stamp]
    # One line, whatever the caller passed (a remote's name, a path): no control characters.
    line = printable(action)[:500] or "change"
    message = line.encode("utf-8", "surrogatepass") + b"\n"
    if tree is None:
        message += b"\n" + ABSENT_TRAILER.encode("ascii") + b"\n"
    commit = store.write_object("commit", b"\n".join(headers) + b"\n\n" + message)
    store.history_states[commit] = (tree, parent)
    return commit


def parse_history_commit(raw: bytes, hex_length: int) -> tuple[str | None, str | None, int, str]:
    """(tree or None when absent, parent, time, action line) of a history commit;
    ValueError when it is not one of ours in shape."""
    head, _, message = raw.partition(b"\n\n")
    fields: dict[bytes, bytes] = {}
    for line in head.split(b"\n"):
        key, _, value = line.partition(b" ")
        if key in fields and key != b"parent":
            raise ValueError("repeated header")
        fields.setdefault(key, value)
    tree = fields.get(b"tree", b"").decode("ascii", "replace")
    parent = fields.get(b"parent")
    if len(tree) != hex_length or tree.strip(HEX):
        raise ValueError("tree")
    parent_id = parent.decode("ascii", "replace") if parent is not None else None
    if parent_id is not None and (len(parent_id) != hex_length or parent_id.strip(HEX)):
        raise ValueError("parent")
    stamp = fields.get(b"committer", b"").rsplit(b" ", 2)
    when = int(stamp[1]) if len(stamp) == 3 and stamp[1].isdigit() else 0
    lines = message.decode("utf-8", "replace").split("\n")
    absent = ABSENT_TRAILER in lines[1:]
    return (None if absent else tree), parent_id, when, lines[0]


def history_state(store: "Any", commit: str) -> tuple[str | None, str | None]:
    """(scope tree or None, parent) recorded by a history commit (cached per store)."""
    known = store.history_states.get(commit)
    if known is None:
        kind, raw = store.read_object_retrying(commit, HISTORY_COMMIT_CAP)
        if kind != "commit" or len(raw) > HISTORY_COMMIT_CAP:
            raise StoreError("UNSAFE_STORAGE", "Memory history holds an object that is not ours.")
        try:
            tree, parent, _, _ = parse_history_commit(raw, store.hex_length)
        except ValueError as error:
            raise StoreError(
                "UNSAFE_STORAGE", "Memory history holds a malformed commit."
            ) from error
        known = store.history_states[commit] = (tree, parent)
    return known


def _history_position(
    store: "Any", digest: str, head: str | None, before: str | None, after: str | None
) -> tuple[str | None, bool] | None:
    """Where AFTER (the scope moved from BEFORE) goes in the history headed by HEAD:
    (the commit it follows, whether BEFORE must be recorded first), or None when a
    concurrent writer has recorded AFTER already. BEFORE is missing from the history
    when the scope held it unrecorded: a write by the original implementation, or one
    whose writer was killed between moving the scope and recording it."""
    if head is not None:
        try:
            state, _ = history_state(store, head)
        except (StoreError, MissingObject):
            notify(f"the history of scope {digest[:12]} cannot be read; it starts again here")
            head = None
    if head is None:
        return None, before is not None
    if state == after:
        return None
    if state == before:
        return head, False
    recent, commit = [], head
    while commit is not None and len(recent) < RECENT_STATES:
        tree, commit = history_state(store, commit)
        recent.append(tree)
    return None if after in recent else (head, True)


def next_history(
    store: "Any", digest: str, head: str | None, before: str | None, after: str | None, action: str
) -> str | None:
    """The new history head recording AFTER (the scope moved from BEFORE), or None when
    a concurrent writer has recorded it already. An unrecorded BEFORE is recorded first
    as `unrecorded`, so nothing the ref held when we read it is lost."""
    position = _history_position(store, digest, head, before, after)
    if position is None:
        return None
    parent, unrecorded = position
    if unrecorded:
        parent = history_commit(store, before, parent, "unrecorded")
    return history_commit(store, after, parent, action)


def unrecorded_state(
    store: "Any", digest: str, head: str | None, before: str | None, after: str | None
) -> str | None:
    """The commit recording BEFORE as `unrecorded` on top of HEAD, when the history lacks
    it; None otherwise. A writer records it *before* moving the scope: until then the
    scope ref keeps BEFORE's tree alive, afterwards only the history does, and a `git gc
    --prune=now` in between would leave a history commit whose tree is gone."""
    position = _history_position(store, digest, head, before, after)
    if position is None or not position[1]:
        return None
    return history_commit(store, before, position[0], "unrecorded")


def record_history(
    store: "Any", digest: str, before: str | None, after: str | None, action: str
) -> str | None:
    """Append AFTER to the history of scope DIGEST, whose ref has just moved from BEFORE
    (None: absent) to AFTER, by the compare-and-swap of `store.update_ref`; the history's
    head afterwards."""
    ref = history_ref(digest)
    for _ in range(MAX_HISTORY_ATTEMPTS):
        head = store.read_ref(ref)
        new = next_history(store, digest, head, before, after, action)
        if new is None:
            return head
        if store.update_ref(ref, head, new):
            if store.kind == "in-process":
                append_reflog(store, ref, head, new, action)
            return new
        pause()
    raise StoreError("STORAGE_ERROR", "Git could not update the memory history.")


def printable(text: str) -> str:
    """TEXT with every character that is not printable (a newline, a control) as "?"."""
    return text if text.isprintable() else "".join(c if c.isprintable() else "?" for c in text)


def append_reflog(store: "Any", ref: str, old: str | None, new: str, message: str) -> None:
    """Append one line to REF's reflog, as git would. History refs keep one (they point
    at commits, so git reads, expires and prunes by it as by any branch's): should a
    history ref ever name a commit a concurrent prune removed, the reflog still holds
    its previous value, and `git gc` keeps everything it names."""
    line = b"%s %s %s %d +0000\t%s\n" % (
        (old or "0" * store.hex_length).encode("ascii"),
        new.encode("ascii"),
        HISTORY_IDENTITY,
        int(time.time()),
        printable(message)[:500].encode("utf-8", "surrogatepass"),
    )
    try:  # git flushes a reflog as it flushes the ref
        reflog.append(store.common_dir, ref, line, store.fsync_refs)
    except OSError as error:  # the ref has moved; only its safety net is missing a line
        notify(f"could not extend the reflog of {ref}: {error.strerror}")
