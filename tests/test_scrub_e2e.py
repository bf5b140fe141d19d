"""End to end: a secret written in two notes (`git obversa record note` twice), then a real
`git commit` through the installed hooks — no part of it reaches the commit message,
subject included. Also the secrets that reached commits before issue 12."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.gitutil import git, obversa

# Made-up credentials in the providers' published formats.
AWS_KEY_ID = "ABIA" + "QXJ4B6LMZR2T7KWD"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    ".eyJzdWIiOiJkZXBsb3kiLCJpYXQiOjE3MDAwMDAwMDB9"
    ".pX2v9Qm4Lk8sT1rNw6Yb3Hc7Jd0Fe5Ga2Ub8Vc4Wd1X"
)
DSN_PASSWORD = "Qm7vT2pL9xRk4sWn"
DSN = f"postgres://deploy:{DSN_PASSWORD}@db.internal.example:5432/orders"
SLACK_WEBHOOK = "https://hooks.slack.com/services/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"
SENDGRID = "SG.kd8Fh2Lq9Zx3Vb7Nm1Pw4R.t6Yc0Ga5Je8Hu2Ko7Ls3Mn9Qb1Wv4Xz6Ai0De5Fg8"
NPM = "npm_Z8kq2Lm5Nv9Xb3Rt7Yw1Pc6Hd4Jf0Gs2Ua8"
PGP_KEY = "\n".join(
    [
        "-----BEGIN PGP PRIVATE KEY BLOCK-----",
        "",
        "lQOYBGV4dE0BCAC7kd8Fh2Lq9Zx3Vb7Nm1Pw4Rt6Yc0Ga5Je8Hu2Ko7Ls3Mn9Qb1",
        "Wv4Xz6Ai0De5Fg8kd8Fh2Lq9Zx3Vb7Nm1Pw4Rt6Yc0Ga5Je8Hu2Ko7Ls3Mn9Qb1Wv",
        "=Xz6A",
        "-----END PGP PRIVATE KEY BLOCK-----",
    ]
)

WEBHOOK_PATH = SLACK_WEBHOOK.removeprefix("https://hooks.slack.com")

# (what, as written, the part that must not survive, where the first note ends)
SPLITS = [
    ("aws key id, mid-word", AWS_KEY_ID, AWS_KEY_ID, 9),
    ("jwt, at a dot", JWT, JWT, JWT.index(".") + 1),
    ("dsn, at the colon of the password", DSN, DSN_PASSWORD, DSN.index(DSN_PASSWORD) - 1),
    ("slack webhook, at a slash", SLACK_WEBHOOK, WEBHOOK_PATH, SLACK_WEBHOOK.index("/B4") + 1),
    ("sendgrid key, at a dot", SENDGRID, SENDGRID, 25),
    ("npm token, mid-word", NPM, NPM, 20),
]


@pytest.fixture
def hooked(repo: Path) -> Path:
    completed = obversa("install", cwd=repo)
    assert completed.returncode == 0, completed.stderr
    return repo


def note(cwd: Path, text: str) -> None:
    completed = obversa("record", "note", "--stage", "implement", text, cwd=cwd)
    assert completed.returncode == 0, completed.stderr


def commit_with_composed_subject(cwd: Path, tmp_path: Path) -> str:
    """Commit a change with plain `git commit`, through an editor that takes everything the
    hook suggested (it uncomments every line, the suggested subject included), so subject
    and body come from the captured notes. Returns what the editor was shown followed by
    the commit message: no secret may be in either."""
    with open(cwd / "config.txt", "a") as handle:
        handle.write("changed\n")
    git(cwd, "add", "config.txt")
    shown = tmp_path / "shown.txt"
    editor = tmp_path / "accept-all.sh"
    editor.write_text(f'#!/bin/sh\ncp "$1" "{shown}"\nsed -i "s/^# \\{{0,1\\}}//" "$1"\n')
    editor.chmod(0o755)
    completed = subprocess.run(
        ["git", "commit", "-q"],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, "GIT_EDITOR": str(editor)},
    )
    assert completed.returncode == 0, completed.stderr
    return shown.read_text() + "\n" + git(cwd, "log", "-1", "--format=%B")


def fragments(secret: str, size: int = 6) -> list[str]:
    """Every run of SIZE characters of SECRET: no such run may survive."""
    return [secret[start : start + size] for start in range(len(secret) - size + 1)]


@pytest.mark.parametrize(
    ("written", "secret", "cut"), [split[1:] for split in SPLITS], ids=[s[0] for s in SPLITS]
)
def test_a_secret_split_across_two_notes_never_reaches_the_commit(
    hooked, tmp_path, written, secret, cut
):
    note(hooked, f"Deploys failed until I set {written[:cut]}")
    note(hooked, f"{written[cut:]} in the environment, because the old one expired.")
    message = commit_with_composed_subject(hooked, tmp_path)
    leaked = [piece for piece in fragments(secret) if piece in message]
    assert leaked == [], message
    assert "[redacted]" in message
    assert "because the old one expired" in " ".join(message.split())  # the reasoning stays


def test_the_subject_is_scrubbed_before_it_is_cut(hooked, tmp_path):
    key = "sk-ant-api03-" + "Vq7Lm2Xc9Rt4Zw8Np3Kd6Hs1Jf5Gb0Ty"
    # The 72-column cut falls inside the key: cut first, a stub like `sk-ant-api03-Vq`
    # would be too short to look like a key any more.
    prose = "Switched the client to the new key "
    note(hooked, prose + key + " so the rate limit no longer trips")
    message = commit_with_composed_subject(hooked, tmp_path)
    subjects = [line for line in message.splitlines() if "the client to the new key" in line]
    assert subjects, message  # the composed subject was suggested or written
    assert "sk-ant" not in message, message
    assert [piece for piece in fragments(key) if piece in message] == [], message


@pytest.mark.parametrize(
    ("written", "secret"),
    [
        (AWS_KEY_ID, AWS_KEY_ID),
        (SLACK_WEBHOOK, WEBHOOK_PATH),
        (SENDGRID, SENDGRID),
        (NPM, NPM),
        (PGP_KEY, PGP_KEY),
    ],
    ids=["aws ABIA key id", "slack webhook", "sendgrid key", "npm token", "pgp private key"],
)
def test_secrets_that_reached_commits_before_are_removed(hooked, tmp_path, written, secret):
    note(hooked, f"The failing job printed:\n\n{written}\n\nso I rotated it.")
    message = commit_with_composed_subject(hooked, tmp_path)
    leaked = [piece for piece in fragments(secret, 8) if piece in message and piece.strip()]
    assert leaked == [], message
    assert "so I rotated it." in message


# --- fifty kinds, end to end (issue 24) ---------------------------------------------------

EXTERNAL = Path(__file__).resolve().parent.parent / "fixtures" / "secrets" / "external.jsonl"
# The prefixes issue 24 found leaking come first; then one token per other vendor prefix.
LISTED_PREFIXES = (
    "dckr_pat_", "sgp_", "$2a$", "django-insecure-", "NRIQ-", "CCIPAT_", "dp.st.", "$6$",
    "$krb5asrep$",
)  # fmt: skip
# How a note carries its token: the ways issue 24's table writes one.
CONTEXTS = (
    "Rotated {token} after the incident.",  # in prose, no keyword
    "The API token is {token}",  # after a keyword
    "The value was {head}\n{tail} in the log.",  # split by a line break
    '{{"role": "tool", "content": "the log said {json} twice"}}',  # JSON-escaped
    "The job printed:\n\n{token}\n\nso I rotated it.",  # bare on its own line
)


def fifty_kinds() -> list[dict]:
    """Fifty tokens of fifty different kinds from the other scanners' examples: the token
    is the whole secret (not a URL or a key block, whose host or armour may stay)."""
    with EXTERNAL.open() as lines:
        rows = [json.loads(line) for line in lines]
    rows = [row for row in rows if row["positive"] and row["token"] == row["secret"]]
    chosen, kinds = [], set()
    for prefix in LISTED_PREFIXES:
        row = next(row for row in rows if row["token"].startswith(prefix))
        chosen.append(row)
        kinds.add(prefix.lower()[:4])
    rows = [row for row in rows if len(row["prefix"]) >= 3]
    for row in sorted(rows, key=lambda row: (row["source"], row["rule"], row["token"])):
        kind = row["prefix"].lower()[:4]
        if kind not in kinds and len(chosen) < 50:
            chosen.append(row)
            kinds.add(kind)
    return chosen


def note_text(number: int, token: str) -> str:
    middle = len(token) // 2
    return CONTEXTS[number % len(CONTEXTS)].format(
        token=token, head=token[:middle], tail=token[middle:], json=json.dumps(token)[1:-1]
    )


def test_fifty_kinds_of_token_reach_neither_commit_nor_store(hooked):
    tokens = [row["token"] for row in fifty_kinds()]
    assert len(tokens) == 50 and len(set(tokens)) == 50
    for number, token in enumerate(tokens):
        note(hooked, f"Note {number}: " + note_text(number, token))
    store = Path(git(hooked, "rev-parse", "--git-path", "obversa/record").strip())
    if not store.is_absolute():
        store = hooked / store
    written = {path.name: path.read_text() for path in store.iterdir() if path.is_file()}
    assert "composed" in written and "turns.jsonl" in written
    (hooked / "config.txt").write_text("changed\n")
    git(hooked, "add", "config.txt")
    git(hooked, "commit", "-q", "-m", "Rotate the leaked credentials")
    message = git(hooked, "log", "-1", "--format=%B")
    assert "Note 49:" in message and "[redacted]" in message
    kept = {path.name: path.read_text() for path in store.iterdir() if path.is_file()}
    for where, text in [("commit", message), *written.items(), *kept.items()]:
        leaked = [
            (token, piece)
            for token in tokens
            for piece in fragments(token)
            if piece in text and piece.strip()
        ]
        assert leaked == [], (where, leaked[:5])
