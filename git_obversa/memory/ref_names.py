"""The refs the memory keeps in a repository, and how their names are made.

Format 1: `refs/obversa/memory/v1/<digest>` names a scope's tree, `refs/obversa/history/v1/
<digest>` a commit per state of the scope, `refs/obversa/names/v1/<digest>` a blob holding
the scope's name; the digest is the SHA-256 of the scope's name (memory/names.py).
"""

SCOPE_REF_PREFIX = "refs/obversa/memory/v1/"  # -> the scope's tree (format 1)
HISTORY_REF_PREFIX = "refs/obversa/history/v1/"  # -> a commit per state of the scope
NAME_REF_PREFIX = "refs/obversa/names/v1/"  # -> a blob holding the scope's name
HEX = "0123456789abcdef"


def history_ref(digest: str) -> str:
    return HISTORY_REF_PREFIX + digest


def scope_ref_digest(ref: str) -> str | None:
    """The digest of a scope ref (`refs/obversa/memory/v1/<64 hex>`), else None."""
    digest = ref[len(SCOPE_REF_PREFIX) :]
    if ref.startswith(SCOPE_REF_PREFIX) and len(digest) == 64 and not digest.strip(HEX):
        return digest
    return None
