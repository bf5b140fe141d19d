"""Recall of scrubbing on the rule examples of scanners other than the engine's own.

`fixtures/secrets/external.jsonl` (built by `build_external.py`, provenance per entry) holds
the positive and negative examples of noseyparker, kingfisher, secretlint, trufflehog and
detect-secrets. None is the gitleaks line that the engine (betterleaks) is built on, so
these figures are generalisation, reported per source. Run with `-s` for the table.

A credential of a *real format* is one whose scanner's regex requires a literal prefix of
three or more characters (`dckr_pat_`, `sgp_`, `-----BEGIN`): it is recognisable anywhere.
Those are put in every context of issue 24's table; each context must catch 95 %.
"""

from __future__ import annotations

import json
from collections import defaultdict
from functools import cache
from pathlib import Path

import pytest

from git_obversa.record.scrub import scrub, scrub_turns

EXTERNAL = Path(__file__).resolve().parent.parent / "fixtures" / "secrets" / "external.jsonl"
SOURCES = ("noseyparker", "kingfisher", "secretlint", "trufflehog", "detect-secrets")
CONTEXTS = ("as written", "bare", "prose", "after a keyword", "line break", "two turns", "json")
# The prefixes issue 24 found leaking: each caught wherever it is written.
LISTED_PREFIXES = (
    "dckr_pat_", "sgp_", "$2a$", "django-insecure-", "NRIQ-", "CCIPAT_", "dp.st.", "$6$",
    "$krb5asrep$",
)  # fmt: skip


@cache
def examples() -> list[dict]:
    with EXTERNAL.open() as lines:
        return [json.loads(line) for line in lines]


def real_format(example: dict) -> bool:
    return example["positive"] and len(example["prefix"]) >= 3


def split_at(example: dict) -> int:
    """Where a line break or a turn boundary cuts the token: the middle of its secret."""
    token, secret = example["token"], example["secret"]
    return token.index(secret) + len(secret) // 2


def survives(secret: str, texts: list[str], cut: int | None = None) -> bool:
    """Whether SECRET, or (when it was cut at CUT) either half of it, is in TEXTS."""
    joined = "".join(texts)
    if secret in joined or secret in joined.replace("\n", ""):
        return True
    if cut is None:
        return False
    halves = [half for half in (secret[:cut], secret[cut:]) if len(half) >= 6]
    return any(half in text for half in halves for text in texts)


def caught(example: dict, context: str) -> bool:
    token, secret = example["token"], example["secret"]
    if context == "as written":
        return not survives(secret, [scrub(example["text"])])
    if context == "bare":
        return not survives(secret, [scrub(token)])
    if context == "prose":
        return not survives(secret, [scrub(f"use {token} here")])
    if context == "after a keyword":
        return not survives(secret, [scrub(f"The API token is {token}")])
    if context == "json":
        text = json.dumps({"role": "assistant", "content": f"the log said {token} twice"})
        scrubbed = scrub(text)
        return not survives(secret, [scrubbed, scrubbed.replace("\\n", "\n")])
    cut = split_at(example)
    cut_in_secret = cut - token.index(secret)
    if context == "line break":
        text = f"The value was {token[:cut]}\n{token[cut:]} in the log."
        return not survives(secret, [scrub(text)], cut_in_secret)
    if context == "two turns":
        turns = scrub_turns([f"The value was {token[:cut]}", f"{token[cut:]} in the log."])
        return not survives(secret, turns, cut_in_secret)
    raise ValueError(context)


def recall(rows: list[dict], context: str) -> tuple[int, int]:
    return sum(caught(row, context) for row in rows), len(rows)


def test_real_formats_are_caught_in_every_context():
    rows = [row for row in examples() if real_format(row)]
    assert len(rows) > 600 and {row["source"] for row in rows} == set(SOURCES)
    by_source = defaultdict(list)
    for row in rows:
        by_source[row["source"]].append(row)
    print(f"\nreal formats, caught/examples ({len(rows)} examples):")
    print(f"{'context':16}" + "".join(f"{source:>16}" for source in SOURCES) + f"{'all':>10}")
    failures = []
    for context in CONTEXTS:
        cells = [recall(by_source[source], context) for source in SOURCES]
        got, total = sum(cell[0] for cell in cells), sum(cell[1] for cell in cells)
        print(
            f"{context:16}"
            + "".join(f"{g:>9}/{t:<4}{g / t:4.0%}"[-16:] for g, t in cells)
            + f"{got / total:>10.1%}"
        )
        if got / total < 0.95:
            failures.append((context, got / total))
    assert not failures


def test_every_example_as_written():
    # All positives, real format or not (many are known only by their surroundings):
    # reported per source, so a figure is never read as more than it is.
    print()
    for source in SOURCES:
        rows = [row for row in examples() if row["positive"] and row["source"] == source]
        got, total = recall(rows, "as written")
        print(f"{source}: {got}/{total} as written ({got / total:.1%})")
        assert got / total >= 0.75, source


@pytest.mark.parametrize("prefix", LISTED_PREFIXES)
def test_each_listed_prefix_is_caught_anywhere(prefix):
    rows = [row for row in examples() if row["positive"] and row["token"].startswith(prefix)]
    assert rows, prefix
    for row in rows:
        for context in CONTEXTS:
            assert caught(row, context), (prefix, context, row["token"])


def test_negative_examples_report():
    # The scanners' negative examples are near misses *for their rule*: many are still
    # credentials of another shape (an example key in a comment). Reported, not bounded.
    rows = [row for row in examples() if not row["positive"]]
    changed = sum(scrub(row["text"]) != row["text"] for row in rows)
    print(f"\nnegative examples changed: {changed}/{len(rows)}")
    assert len(rows) > 300
