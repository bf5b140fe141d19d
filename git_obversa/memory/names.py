"""Scope names: kept beside the scopes, so a digest can be shown as the name it stands for.

A scope is stored under the SHA-256 of its name (format 1 has no room for the name).
The name lives in its own ref, `refs/obversa/names/v1/<digest>`, pointing at a blob that
holds the name's UTF-8 bytes. The blob proves itself: it counts only when its digest is
the ref's, so a clone can never hold a wrong name and sync carries these refs as they
are. A scope written by the original implementation has no name until one of our
writers (or `resolve_scope` given its name) records it.

A name means the same everywhere: `resolve_scope` reads any text as a name (`2c26b46b`
is the scope named so, never the scope whose digest starts so). A scope known only by its
digest is reached in a spelling that cannot be a name: `by_digest(prefix)` marks the
text with a control character, which no name may hold; the CLI's `--scope-digest` gives
it. A prefix must be unique.
"""

from git_obversa.lean.builtin import builtin_sha256
from git_obversa.lean.record import Record, field
from git_obversa.memory.port import MemoryFailure, validate_scope
from git_obversa.memory.ref_names import HISTORY_REF_PREFIX, NAME_REF_PREFIX, SCOPE_REF_PREFIX
from git_obversa.memory.store_errors import MissingObject, StoreError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# CPython's own SHA-256 (lean/builtin.py), for a scope name's few bytes on every command.
sha256 = builtin_sha256()

NAME_CAP = 65536  # bytes of a name blob we read; a longer "name" is no name of ours
MIN_PREFIX = 6  # hex digits a digest prefix needs (shorter reads as a name)
SHOWN_DIGITS = 12
HEX_DIGITS = frozenset("0123456789abcdef")
DIGEST_MARK = "\x1d"  # begins a scope given by digest; a name holds no control character


def by_digest(prefix: str) -> str:
    """The spelling of "the scope whose digest is PREFIX, or starts with it" that every
    `scope` argument resolved through `resolve_scope` takes (the CLI's --scope-digest)."""
    return DIGEST_MARK + prefix


def is_hex(text: str, shortest: int, longest: int = 64) -> bool:
    """Whether TEXT is SHORTEST to LONGEST lowercase hex digits (a digest, or its prefix)."""
    return shortest <= len(text) <= longest and HEX_DIGITS.issuperset(text)


def scope_digest(scope: str) -> str:
    """The sha256 hex digest of SCOPE's UTF-8 bytes: the ref suffix and `scopeDigest`."""
    return sha256(scope.encode("utf-8")).hexdigest()


def display(digest: str, name: str | None) -> str:
    """How a scope is shown: `team (37a8eec1ce19)`, or the short digest when nameless."""
    short = digest[:SHOWN_DIGITS]
    return f"{name} ({short})" if name is not None else short


class Resolved(Record):
    """A scope as the user named it: its digest and, when known, its name (None)."""

    __slots__ = ()
    _fields = ("digest", "name")
    digest = field(0)
    name = field(1)

    def __new__(cls, digest: str, name: str | None) -> "Resolved":
        return tuple.__new__(cls, (digest, name))

    @property
    def label(self) -> str:
        return display(self.digest, self.name)


class ScopeNotFound(MemoryFailure):
    def __init__(self, message: str) -> None:
        super().__init__("NOT_FOUND", message)


class AmbiguousScope(MemoryFailure):
    def __init__(self, message: str) -> None:
        super().__init__("INVALID_ARGUMENT", message)


def checked_name(store: "Any", digest: str, value: str | None) -> str | None:
    """The name the blob VALUE holds if it proves itself the name of scope DIGEST (its
    sha256 is the digest, and it is a valid scope name); else None. Sync checks fetched
    names with it."""
    if value is None or value.startswith("ref:"):
        return None
    try:
        kind, data = store.read_object_retrying(value, NAME_CAP)
    except (StoreError, MissingObject):
        return None
    if kind != "blob" or len(data) > NAME_CAP or sha256(data).hexdigest() != digest:
        return None
    try:
        return validate_scope(data.decode("utf-8"))
    except (UnicodeDecodeError, TypeError):
        return None


def scope_name(store: "Any", digest: str) -> str | None:
    """The recorded name of scope DIGEST, or None (never recorded, or not a valid one)."""
    return checked_name(store, digest, store.read_ref(NAME_REF_PREFIX + digest))


def names(store: "Any") -> dict[str, str]:
    """digest -> name for every scope whose name is recorded here."""
    found = {}
    for ref, value in store.list_refs(NAME_REF_PREFIX).items():
        digest = ref[len(NAME_REF_PREFIX) :]
        name = checked_name(store, digest, value) if is_hex(digest, 64) else None
        if name is not None:
            found[digest] = name
    return found


def record_name(store: "Any", name: str) -> None:
    """Record NAME for its scope (nothing to do when it is recorded already)."""
    digest = scope_digest(validate_scope(name))
    ref = NAME_REF_PREFIX + digest
    current = store.read_ref(ref)
    if current is not None and checked_name(store, digest, current) == name:
        return
    blob = store.write_object("blob", name.encode("utf-8"))
    store.update_ref(ref, current, blob)  # lost to a concurrent recorder: the same blob


def known_digests(store: "Any") -> set[str]:
    """Digests of the scopes this repository holds, or held (a history survives a drop)."""
    found = set()
    for prefix in (SCOPE_REF_PREFIX, HISTORY_REF_PREFIX):
        for ref in store.list_refs(prefix):
            digest = ref[len(prefix) :]
            if is_hex(digest, 64):
                found.add(digest)
    return found


def resolve_scope(store: "Any", text: str, *, existing: bool = True) -> Resolved:
    """The scope named TEXT, or, for TEXT made by `by_digest`, the scope whose digest is
    that prefix (six hex digits or more, unique) or that full digest.

    With EXISTING False, a name no scope has yet resolves to the scope it would create
    (for writes); a digest always names a scope that exists."""
    if text.startswith(DIGEST_MARK):
        return _resolve_digest(store, text[len(DIGEST_MARK) :])
    try:
        validate_scope(text)
    except TypeError as error:
        raise ScopeNotFound(f"--scope: {error}") from None
    digest = scope_digest(text)
    if not existing or digest in known_digests(store):
        return Resolved(digest, text)
    hint = ""
    if is_hex(text.lower(), MIN_PREFIX):
        hint = f"; a scope known by its digest: --scope-digest {text}"
    raise ScopeNotFound(
        f"no scope named '{text}' in this repository; `git obversa memory scopes` lists them{hint}"
    )


def _resolve_digest(store: "Any", prefix: str) -> Resolved:
    lowered = prefix.lower()
    if not is_hex(lowered, MIN_PREFIX):
        raise ScopeNotFound(
            f"--scope-digest: '{prefix}' is not {MIN_PREFIX} to 64 hex digits of a digest"
        )
    matches = sorted(d for d in known_digests(store) if d.startswith(lowered))
    if len(matches) == 1:
        return Resolved(matches[0], scope_name(store, matches[0]))
    if matches:
        shown = ", ".join(display(d, scope_name(store, d)) for d in matches[:5])
        raise AmbiguousScope(
            f"'{prefix}' starts the digests of {len(matches)} scopes ({shown}); give more digits"
        )
    raise ScopeNotFound(
        f"no scope whose digest starts with '{prefix}' in this repository; "
        "`git obversa memory scopes` lists them"
    )
