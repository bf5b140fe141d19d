"""Secret scrubbing: every recognised credential shape becomes `[redacted]`.

Runs on the composed reasoning (subject and body) before it is bounded and written into a
commit, never on the user's own message. The shapes are the original's four (SPEC §7.6:
Anthropic keys, OpenAI-style keys, e-mail addresses, credential assignments) plus the
common provider tokens, applied one after another in the order of `SHAPES`.

Deliberate choices, each covered by the ordinary-text corpus in `fixtures/secrets/`:
- A credential assignment (`password=…`, `token: …`, `"api_key": "…"`) is redacted key and
  value together, but only when the value is a literal. A value that is code or prose is
  left alone: a call or subscript (`getpass()`, `headers["x"]`), an attribute (`os.environ`),
  a placeholder (`$TOKEN`, `${{ secrets.X }}`, `<your key>`), a type (`&str`, `Vec<u8>`),
  a variable on the right of a spaced `=` (`token = new_token`, shorter than 32
  characters), a literal like `None`/`true`, and an alphabetic word after `: `
  (`token: str`, `Authorization: required`). The value never runs onto the next line.
- An SSH remote (`git@github.com:org/repo.git`, `ssh://git@host/repo`) names a service
  account, not a person: it is kept. So is a retina asset name (`icon@2x.png`).
- Credentials in a URL keep the scheme and host: `https://[redacted]@host/path`.
- Any `sk-` word of eight or more key characters counts as a key (the original's rule), so
  `sk-learn` survives but a hyphenated `sk-` word of eight letters would not.
"""

from __future__ import annotations

import re
from collections.abc import Callable

REDACTED = "[redacted]"

_KEY_CHARS = r"[A-Za-z0-9_-]"
_NOT_KEY_CHAR = r"(?![A-Za-z0-9_-])"

# Key names of a credential assignment, after up to four `prefix_` parts (DB_PASSWORD).
# Repetitions are bounded here and in the e-mail shape so no input costs quadratic time.
_CREDENTIAL_KEY = (
    r"(?:[A-Za-z0-9]+[_-]){0,4}"
    r"(?:api[_-]?key|apikey|token|secret|password|passwd|authorization|bearer"
    r"|secret[_-]?access[_-]?key|client[_-]?secret|private[_-]?key)"
)
_ASSIGNMENT = re.compile(
    r"[\"']?\b" + _CREDENTIAL_KEY + r"\b"
    r"(?P<closing>[\"']?)(?P<separator>[ \t]*(?<![=!<>])[=:](?![=:/])[ \t]*)"
    r"(?P<value>\"[^\"\n]*\"|'[^'\n]*'|[^\s\"'`]+)",
    re.IGNORECASE,
)
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_DOTTED_NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
_NON_SECRET_WORDS = {"none", "null", "nil", "true", "false", "undefined"}


def _is_literal_secret(match: re.Match) -> bool:
    """Whether an assignment's value is a literal (a secret) rather than code or prose."""
    value = match.group("value")
    separator = match.group("separator")
    if value[0] in "\"'":
        inner = value[1:-1].strip()
        return bool(inner) and inner[0] not in "$<{%" and not inner.startswith("*")
    bare = value.rstrip(",;.)")
    if not bare or bare[0] in "$<{([%*&#" or any(mark in bare for mark in ("(", ")", "[", "<")):
        return False
    if bare.lower() in _NON_SECRET_WORDS or _DOTTED_NAME.fullmatch(bare):
        return False
    if "=" in separator and separator[0].isspace() and _IDENTIFIER.fullmatch(bare):
        return len(bare) >= 32  # `token = new_token` names a variable; long runs are keys
    if ":" in separator and separator[-1].isspace() and bare.isalpha():
        # `token: str`, `Authorization: required`; a long random run of letters is a key.
        return len(bare) >= 16 and not (bare.islower() or bare.istitle())
    return True


def _assignment(match: re.Match) -> str:
    return REDACTED if _is_literal_secret(match) else match.group(0)


def _url_credentials(match: re.Match) -> str:
    return match.group("scheme") + REDACTED + "@"


def _email(match: re.Match) -> str:
    text, start, end = match.string, match.start(), match.end()
    if text.endswith("://", 0, start):
        return match.group(0)  # the user name of a URL without a password (ssh://git@host)
    if text.startswith(":", end) and end + 1 < len(text) and not text[end + 1].isspace():
        return match.group(0)  # an scp-style SSH remote (git@host:path)
    return REDACTED


Replacement = Callable[[re.Match], str] | str

# (name, pattern, replacement), applied in this order. PEM blocks first (a whole block
# goes), URL credentials before e-mail (so `user:pass@host` keeps its host), then the
# original's four shapes in their order, then provider tokens.
SHAPES: list[tuple[str, re.Pattern, Replacement]] = [
    (
        "pem private key",
        re.compile(
            r"-----BEGIN (?P<label>[A-Z0-9 ]*)PRIVATE KEY-----"
            r"(?:.*?-----END (?P=label)PRIVATE KEY-----|(?:\n[A-Za-z0-9+/=:, -]+(?=\n|$))*)",
            re.DOTALL,
        ),
        REDACTED,
    ),
    (
        "url credentials",
        re.compile(
            r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]{0,31}://)"
            r"(?:[^\s/@:]{1,256}:[^\s/@]{1,256}|[^\s/@:]{16,256})@"
        ),
        _url_credentials,
    ),
    ("anthropic key", re.compile(r"sk-ant-" + _KEY_CHARS + r"{8,}"), REDACTED),
    ("openai-style key", re.compile(r"\bsk-(?!ant-)" + _KEY_CHARS + r"{8,}"), REDACTED),
    (
        "e-mail address",
        re.compile(r"\b[A-Za-z0-9._%+-]{1,64}@(?!\d+x\.)[A-Za-z0-9.-]{1,253}\.[A-Za-z]{2,}\b"),
        _email,
    ),
    ("credential assignment", _ASSIGNMENT, _assignment),
    (
        "bearer credential",
        re.compile(r"\b(?:Bearer|Basic)\s+(?=[A-Za-z0-9._~+/=-]*\d)[A-Za-z0-9._~+/=-]{12,}"),
        REDACTED,
    ),
    (
        "github token",
        re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})\b"),
        REDACTED,
    ),
    ("gitlab token", re.compile(r"\bglpat-" + _KEY_CHARS + r"{20,}" + _NOT_KEY_CHAR), REDACTED),
    ("aws access key id", re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"), REDACTED),
    ("google api key", re.compile(r"\bAIza" + _KEY_CHARS + r"{35}" + _NOT_KEY_CHAR), REDACTED),
    ("slack token", re.compile(r"\bxox[abpr]-[A-Za-z0-9-]{10,}"), REDACTED),
    ("stripe key", re.compile(r"\b[sr]k_(?:live|test)_[A-Za-z0-9]{16,}\b"), REDACTED),
    (
        "json web token",
        re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*" + _NOT_KEY_CHAR),
        REDACTED,
    ),
]


def scrub(text: str) -> str:
    """TEXT with every secret shape replaced by `[redacted]`."""
    for _name, pattern, replacement in SHAPES:
        text = pattern.sub(replacement, text)
    return text
