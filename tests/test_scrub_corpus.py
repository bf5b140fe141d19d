"""Recall and false hits of scrubbing, against corpora we did not write.

The secrets are the public test samples of gitleaks, trufflehog and detect-secrets
(`fixtures/secrets/scanners.jsonl`, built by `fixtures/secrets/build_scanners.py`); the
ordinary text is git's release notes and CPython's standard library
(`fixtures/secrets/ordinary-*.txt`). Run with `-s` to see the report; the figures are
quoted in docs/reasoning.md.

A sample is caught when its secret is gone from the scrubbed text. The common kinds are
also put in five contexts: the line that holds the secret as a config line, the same line
bare in a sentence, inside a JSON string, inside a code fence, and split in two across
two turns (in the middle of the secret, and at a punctuation mark inside it) scrubbed by
`scrub_turns` — there, no half of the secret may survive.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from functools import cache
from pathlib import Path

from git_obversa.record.scrub import REDACTED, _redact, scrub, scrub_turns, secret_spans
from git_obversa.record.secret_rules import RULES

SECRETS = Path(__file__).resolve().parent.parent / "fixtures" / "secrets"

# The common kinds, by the scanners' rule and detector names.
COMMON_KINDS = {
    "aws": r"^aws",
    "github": r"^github",
    "gitlab": r"^gitlab",
    "slack": r"^slack",
    "stripe": r"^stripe",
    "openai": r"^openai",
    "anthropic": r"^anthropic",
    "google": r"^(?:gcp|google)",
    "azure": r"^azure",
    "jwt": r"^jwt",
    "private key": r"^private[-_]key",
    "npm": r"^npm",
    "pypi": r"^pypi",
    "sendgrid": r"^sendgrid",
    "twilio": r"^twilio",
    "db/basic-auth url": r"^(?:jdbc|uri|basic_auth|ftp|ldap|mongodb|postgres|redis|sqlserver"
    r"|rabbitmq|sidekiq-sensitive-url|curl-auth-user)",
    "generic assignment": r"^(?:generic-api-key|keyword)$",
}
SERVICE_ACCOUNT = "service-account json"
CONTEXTS = ("as written", "config line", "bare", "json", "fence", "split")


@cache
def scanner_samples() -> list[dict]:
    with (SECRETS / "scanners.jsonl").open() as lines:
        return [json.loads(line) for line in lines]


def family(sample: dict) -> str | None:
    if '"service_account"' in sample["text"]:
        return SERVICE_ACCOUNT
    for name, pattern in COMMON_KINDS.items():
        if re.search(pattern, sample["kind"]):
            return name
    return None


def unit(sample: dict) -> str:
    """What a context places: the line that holds the secret with the two lines before it
    (where a keyword such as `azure_storage_key:` may stand), or the whole text when the
    secret spans lines (a private key, a service-account file)."""
    text, secret = sample["text"], sample["secret"]
    if "\n" in secret or "BEGIN" in text or family(sample) == SERVICE_ACCOUNT:
        return text.strip()
    start = text.index(secret)
    line_start = start
    for _ in range(3):
        line_start = text.rfind("\n", 0, max(line_start - 1, 0)) + 1 if line_start else 0
    line_end = text.find("\n", start + len(secret))
    lines = text[line_start : line_end if line_end >= 0 else len(text)].strip().splitlines()
    return "\n".join(line.strip() for line in lines)


def in_context(sample: dict, context: str) -> list[str]:
    """The texts of SAMPLE in CONTEXT (`split` gives the turns)."""
    line = unit(sample)
    if context == "as written":
        return [sample["text"]]
    if context == "config line":
        return [line]
    if context == "bare":
        return [f"While debugging I found {line} in the output, so I rotated it."]
    if context == "json":
        return [json.dumps({"role": "assistant", "content": f"the log said {line} twice"})]
    if context == "fence":
        return [f"Here is the failing call:\n\n```\n{line}\n```\n\nIt fails on retry."]
    raise ValueError(context)


def split_points(secret: str) -> list[int]:
    points = [len(secret) // 2]
    punctuation = [m.start() + 1 for m in re.finditer(r"[.:/@_-]", secret)]
    inner = [point for point in punctuation if 4 <= point <= len(secret) - 4]
    if inner:
        points.append(min(inner, key=lambda point: abs(point - len(secret) // 2)))
    return points


def caught(sample: dict, context: str) -> bool:
    secret = sample["secret"]
    if context != "split":
        texts = in_context(sample, context)
        scrubbed = scrub(texts[0])
        if context == "json":
            scrubbed = json.loads(scrubbed)["content"] if _valid_json(scrubbed) else scrubbed
            secret = json.dumps(secret)[1:-1]
            return secret not in scrubbed and sample["secret"] not in scrubbed
        return secret not in scrubbed
    line = unit(sample)
    at = line.index(secret)
    for point in split_points(secret):
        cut = at + point
        turns = scrub_turns([f"Working on it: {line[:cut]}", f"{line[cut:]} and it failed."])
        halves = (secret[:point], secret[point:])
        if halves[0] in turns[0] or halves[1] in turns[1] or secret in "".join(turns):
            return False
    return True


def _valid_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def recall_table() -> dict[str, dict[str, list[int]]]:
    table: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for sample in scanner_samples():
        name = family(sample)
        if name is None:
            continue
        for context in CONTEXTS:
            cell = table[name][context]
            cell[1] += 1
            cell[0] += caught(sample, context)
    return table


def test_recall_on_the_common_kinds_in_every_context():
    table = recall_table()
    assert set(table) == set(COMMON_KINDS) | {SERVICE_ACCOUNT}
    print("\nrecall on the common kinds (caught/samples):")
    print(f"{'kind':22}" + "".join(f"{context:>13}" for context in CONTEXTS))
    totals = {context: [0, 0] for context in CONTEXTS}
    for name in sorted(table):
        row = table[name]
        print(f"{name:22}" + "".join(f"{row[c][0]:>7}/{row[c][1]:<5}" for c in CONTEXTS))
        for context in CONTEXTS:
            totals[context][0] += row[context][0]
            totals[context][1] += row[context][1]
    rates = {context: caught / total for context, (caught, total) in totals.items()}
    print(f"{'all common kinds':22}" + "".join(f"{rates[c]:>12.1%} " for c in CONTEXTS))
    for context, rate in rates.items():
        assert rate >= 0.95, (context, rate)


def test_recall_on_all_kinds_as_written():
    per_kind: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    missed = []
    for sample in scanner_samples():
        cell = per_kind[(sample["source"], sample["kind"])]
        cell[1] += 1
        if caught(sample, "as written"):
            cell[0] += 1
        else:
            missed.append(sample)
    samples = sum(total for _, total in per_kind.values())
    recall = 1 - len(missed) / samples
    whole = sum(1 for got, total in per_kind.values() if got == total)
    print(
        f"\nall kinds as written: {samples - len(missed)}/{samples} samples caught "
        f"({recall:.1%}); {whole}/{len(per_kind)} kinds caught in every sample"
    )
    for source in ("gitleaks", "trufflehog", "detect-secrets"):
        rows = [s for s in scanner_samples() if s["source"] == source]
        got = sum(1 for s in rows if s not in missed)
        print(f"  {source}: {got}/{len(rows)} ({got / len(rows):.1%})")
    assert samples > 2000 and len(per_kind) > 1000
    assert recall >= 0.80


def ordinary_chunks(name: str) -> list[str]:
    text = (SECRETS / f"ordinary-{name}.txt").read_text()
    if name == "packages":  # each chunk after a line `\f <distribution> <path>:<line>`
        return [chunk.split("\n", 1)[1] for chunk in text.split("\f ")[1:]]
    return text.split("\n\n\f\n\n")


WITHOUT_EMAIL = [rule for rule in RULES if rule.name != "e-mail address"]


def scrub_without_email(text: str) -> str:
    return _redact(text, secret_spans(text, WITHOUT_EMAIL))


def test_ordinary_text_is_left_alone():
    print()
    for name, minimum in (("relnotes", 2500), ("cpython", 1800), ("packages", 1000)):
        chunks = ordinary_chunks(name)
        scrubbed = [scrub_without_email(chunk) for chunk in chunks]
        changed = [chunk for chunk, after in zip(chunks, scrubbed, strict=True) if after != chunk]
        lines = sum(len(chunk.splitlines()) for chunk in chunks)
        lines_changed = sum(
            before != after
            for chunk, done in zip(chunks, scrubbed, strict=True)
            for before, after in zip(chunk.splitlines(), done.splitlines(), strict=False)
        )
        with_email = sum(1 for chunk in chunks if scrub(chunk) != chunk)
        print(
            f"ordinary text, {name}: {lines_changed}/{lines} lines changed "
            f"({lines_changed / lines:.2%}), {len(changed)}/{len(chunks)} chunks "
            f"({len(changed) / len(chunks):.2%}); {with_email} chunks counting e-mail addresses"
        )
        assert lines_changed <= lines // 100
        assert len(chunks) >= minimum
        assert len(changed) <= len(chunks) // 100, [
            (chunk, scrub_without_email(chunk)) for chunk in changed
        ]


def test_a_redaction_keeps_the_words_around_it():
    # For every sample bare in a sentence, the sentence's own words survive.
    for sample in scanner_samples()[::7]:
        if family(sample) is None:
            continue
        scrubbed = scrub(in_context(sample, "bare")[0])
        if REDACTED in scrubbed:
            assert scrubbed.startswith("While debugging I found "), scrubbed
            assert scrubbed.endswith(" in the output, so I rotated it."), scrubbed
