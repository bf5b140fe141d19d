"""Which writes git flushes to disk, by the repository's configuration.

Git's default flushes neither loose objects nor refs; `core.fsync`, `core.fsyncMethod`
and the older `core.fsyncObjectFiles` ask for more. What we write into a repository is
flushed exactly when git would flush the same write: no more and no less.
"""

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

GROUPS = {  # core.fsync words that name each component we write (git's aggregates)
    "loose-object": {"loose-object", "objects", "committed", "added", "all"},
    "reference": {"reference", "committed", "added", "all"},
}
TRUE_WORDS = {"true", "yes", "on", "1"}


def fsyncs(config: "Mapping[str, str | None]", component: str) -> bool:
    """Whether git, with this repository's config (lower-case keys), flushes COMPONENT to
    disk when it writes one ("loose-object" or "reference").

    As git's `parse_fsync_components`: `none` clears the default, a word adds its
    components, `-word` removes them from the default, and what is named positively
    wins; git's default names neither loose objects nor refs. `core.fsyncObjectFiles`
    (older) forces it for loose objects. `core.fsyncMethod=writeout-only` only starts
    the write-back without waiting for it, which Python cannot ask for: no flush then.
    `batch` (loose objects written without a flush each, one disk flush before the ref
    moves) is honoured as a flush of each object: as durable, never less.
    """
    if component == "loose-object" and "core.fsyncobjectfiles" in config:
        if (config["core.fsyncobjectfiles"] or "true").strip().lower() in TRUE_WORDS:
            return True
    if (config.get("core.fsyncmethod") or "").strip().lower() == "writeout-only":
        return False
    words = (config.get("core.fsync") or "").lower().replace(" ", "").split(",")
    return any(word in GROUPS[component] for word in words)
