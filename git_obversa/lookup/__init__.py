"""The blame engine: from a line of a file to the commit that wrote it and its reason.

Here, what its modules share (`blame.py` answers a lookup, from the cache where it can;
`git_blame.py` runs git blame when it cannot): the error a lookup raises, and a commit's
fields as a lookup gives them. Kept here rather than in a module of their own: the
package is loaded anyway, and a warm `git obversa why` loads no module it can do without
(tests/test_cli_start.py).
"""

import time

# The fields of a commit, in the order `commit_fields` gives them (and a cache entry
# keeps them); a commit blame found also has "ranges" and "paths".
COMMIT_KEYS = ("commit", "author", "email", "date", "subject", "body", "reasoning")


class BlameError(Exception):
    """The lines cannot be blamed (missing or binary file, bad range or revision)."""


def commit_fields(sha: str, author: str, email: str, date: str, message: str) -> tuple:
    """A commit's values in the order of COMMIT_KEYS, from its message."""
    subject, body = _subject_and_body(message)
    return (sha, author, email, date, subject, body, _reasoning(message))


def _subject_and_body(message: str) -> tuple[str, str]:
    """Split a message as `git log` does for %s and %b: the first paragraph, the rest."""
    text = message.replace("\r\n", "\n").strip("\n")
    first, _, rest = text.partition("\n\n")
    if "\n" not in first and first.strip():  # the usual: a one-line subject
        return first.strip(), rest.strip("\n").rstrip()
    lines = text.split("\n")
    blank = next((number for number, line in enumerate(lines) if not line.strip()), len(lines))
    subject = " ".join(line.strip() for line in lines[:blank])
    return subject, "\n".join(lines[blank:]).strip("\n").rstrip()


def _reasoning(message: str) -> str | None:
    """`parse_reasoning`, its module imported on the first call (then it replaces this
    function): a lookup answered from the cache reads no message, and need not load it."""
    global _reasoning
    from git_obversa.record.message import parse_reasoning

    _reasoning = parse_reasoning
    return parse_reasoning(message)


def iso_date(seconds: bytes, zone: bytes) -> str:
    """ISO 8601 date of SECONDS since the epoch in ZONE (`+0100`), as `git log %aI`."""
    offset = _ZONES.get(zone)
    if offset is None:
        try:
            minutes = int(zone[1:3]) * 60 + int(zone[3:5])
        except ValueError:
            minutes = 0
        if zone.startswith(b"-"):
            minutes = -minutes
        sign = "-" if minutes < 0 else "+"
        offset = _ZONES[zone] = (
            minutes * 60,
            f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}",
        )
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(int(seconds) + offset[0])) + offset[1]


# Time zone as blame writes it (`-0530`) -> (offset in seconds, as ISO 8601 writes it).
_ZONES: dict[bytes, tuple[int, str]] = {}


def commit_dict(fields: tuple) -> dict:
    """A commit's dict as `lookup` gives it, from its 7 fields, its `ranges` and `paths`
    still empty."""
    sha, author, email, date, subject, body, reasoning = fields
    # The keys of COMMIT_KEYS, in their order.
    return {
        "commit": sha,
        "author": author,
        "email": email,
        "date": date,
        "subject": subject,
        "body": body,
        "reasoning": reasoning,
        "ranges": [],
        "paths": [],
    }
