"""Secret scrubbing: every recognised credential becomes `[redacted]`.

Runs on the reasoning (each captured turn as it is stored, and the composed subject and
body) before anything is written, never on the user's own message. Two layers find
secrets, and every finding keeps the name of what found it (`findings`):
- the engine (`secrets_engine`: betterleaks, a maintained rule set of the gitleaks line),
  named `betterleaks:<rule id>`; without it our own rules still run;
- our own rules (`secret_rules`), for what engines do not do: credentials in URLs,
  key=value and PEM blocks, a random value beside a credential word, the formats an
  engine does not know yet.
Both look at the text as written and at two views of it mapped back to its positions:
JSON and code escapes made plain (`\\"`, `\\n`), and every line break inside a token read
as a join (a key wrapped in prose, split by a line break, or cut between two captured
turns by `scrub_turns`). A secret found across a break is `[redacted]` where it starts,
and the rest of it is removed; the break and the words around it stay.

What stays: prose, code (calls, attributes, a variable passed as itself:
`access_token=access_token`, placeholders like `$TOKEN`), the punctuation around a
secret, commit hashes and UUIDs outside an assignment, SSH remotes, and the ids of
agents' messages and tool calls (`toolu_…`, `msg_…`). Measured against corpora we did not
write (`fixtures/secrets/`, `tests/test_scrub_corpus.py`, `tests/test_scrub_external.py`;
figures in `docs/reasoning.md`).
"""

from __future__ import annotations

import bisect
from collections import namedtuple
from collections.abc import Iterable, Sequence

from git_obversa.record import secrets_engine
from git_obversa.record.secret_rules import FORMAT_RULES, LazyRegex, Rule, rule_findings

REDACTED = "[redacted]"

Span = tuple[int, int]


# A secret at START:END of a text, found by RULE (ours, or `betterleaks:<id>`). A TAIL
# is the rest of a secret cut by a line break: removed, not marked again. (A named tuple
# from collections: the commit hook's path does not import typing.)
Finding = namedtuple("Finding", "start end rule tail", defaults=(False,))


def findings(
    text: str, rules: Sequence[Rule] | None = None, engine: bool = True, joins: bool = True
) -> list[Finding]:
    """Every secret in TEXT, sorted, by our RULES (all by default) and, unless ENGINE is
    False, the engine; with JOINS, also across the line breaks inside tokens. A value
    found once is found wherever else it appears too (a key pasted twice is named by its
    keyword once)."""
    if not text:
        return []
    view = _unescaped(text)
    found = [Finding(*found) for found in rule_findings(view, rules)]
    if engine:
        found += [Finding(*found) for found in secrets_engine.engine_spans(view)]
    if joins:
        found += _across_breaks(view, found, rules, engine)
    found = [finding for finding in found if not _AGENT_ID.fullmatch(view, *finding[:2])]
    found += _repeats(view, found)
    return sorted(found)


def secret_spans(text: str, rules: Sequence[Rule] | None = None) -> list[Span]:
    """The merged, sorted spans of TEXT that are secrets (see `findings`)."""
    return [(start, end) for start, end, _ in _runs(findings(text, rules))]


# --- views of a text, mapped back to its positions ----------------------------------------

_UNESCAPE = LazyRegex(r"\\([\"'nrt])")
_UNESCAPED = {'"': '"', "'": "'", "n": "\n", "r": "\r", "t": "\t"}


def _unescaped(text: str) -> str:
    """TEXT with JSON's and code's escapes of quotes and line breaks made plain, of the
    same length (each escape becomes a space and the character), so spans carry over."""
    if "\\" not in text:
        return text
    return _UNESCAPE.sub(lambda match: " " + _UNESCAPED[match.group(1)], text)


# A line break between two characters of a token, with the indentation, quoting and
# continuation marks around it.
_TOKEN_CHARS = r"A-Za-z0-9+/=_.~$-"
_BREAK = LazyRegex(rf"(?<=[{_TOKEN_CHARS}])[ \t]*\\?[ \t]*\r?\n[ \t>#*]*(?=[{_TOKEN_CHARS}])")


def _across_breaks(
    view: str, found: Sequence[Finding], rules: Sequence[Rule] | None, engine: bool
) -> list[Finding]:
    """Secrets that only exist with the line breaks inside tokens taken out: found in the
    joined view by the rules that know a secret by its shape (and the engine), kept if
    they cross a break, and mapped back as a head (marked) and tails (removed).

    A break is inside a token unless a token FOUND by its shape starts after it, or one ends
    before it and a word follows, or a word ends before it (`more` before a token on the
    next line is not its head)."""
    ends = {finding.end for finding in found}
    format_names = {rule.name for rule in FORMAT_RULES}
    starts_at = {
        finding.start
        for finding in found
        if finding.rule in format_names or finding.rule.startswith(secrets_engine.ENGINE)
    }
    word_before, word_after = _WORD_BEFORE.search, _WORD_AFTER.match
    breaks = [
        match.span()
        for match in _BREAK.finditer(view)
        if not (match.start() in ends and word_after(view, match.end()))
        and match.end() not in starts_at
        and not word_before(view, max(match.start() - 14, 0), match.start())
    ]
    if not breaks:
        return []
    # joined[i] for i in segment k is view[origins[k] + i - starts[k]]
    pieces, starts, origins, position, length = [], [], [], 0, 0
    for start, end in [*breaks, (len(view), len(view))]:
        starts.append(length)
        origins.append(position)
        pieces.append(view[position:start])
        length += start - position
        position = end
    joined = "".join(pieces)
    format_rules = [rule for rule in FORMAT_RULES if rules is None or rule in rules]
    found = rule_findings(joined, format_rules)
    if engine:
        found += secrets_engine.engine_spans(joined)
    out = []
    for start, end, name in found:
        first = bisect.bisect_right(starts, start) - 1
        last = bisect.bisect_right(starts, end - 1) - 1
        if first == last:
            continue  # no break inside: the view as written has it
        for segment in range(first, last + 1):
            low = max(start, starts[segment]) - starts[segment] + origins[segment]
            high = min(end, starts[segment] + len(pieces[segment])) - starts[segment]
            high += origins[segment]
            if low < high:
                out.append(Finding(low, high, name, segment != first))
    return out


# A short word of letters only, alone before a break or a boundary between turns.
_WORD_BEFORE = LazyRegex(r"(?:^|[\s\"'`(\[{<,;])[A-Za-z]{1,12}\Z")


_WORD_AFTER = LazyRegex(r"[A-Za-z]{1,12}(?=$|[\s\"'`.,;:!?)\]}>])")


# Ids of agents' messages, tool calls, requests and workspaces: random, not secrets
# (Anthropic's are a type, `_01` and a base62 run: `msg_01…`, `wrkspc_01…`).
_AGENT_ID = LazyRegex(
    r"(?:srvtoolu|toolu|msg|req|call|resp|run|thread|asst|batch|file)_[A-Za-z0-9]{8,48}"
    r"|[a-z]{2,12}_01[A-Za-z0-9]{20,30}|chatcmpl-[A-Za-z0-9]{8,48}"
)
_WHITESPACE = LazyRegex(r"\s")
_TAIL = LazyRegex(r"[A-Za-z0-9+/=_.~-]{4,}")
_VALUE_RUN = LazyRegex(r"[A-Za-z0-9+/_.~-]{10,}")
_DIGIT = LazyRegex(r"\d")
_LETTER = LazyRegex(r"[A-Za-z]")


def _repeats(text: str, found: Sequence[Finding]) -> list[Finding]:
    values = {
        run
        for start, end, _, tail in found
        if not tail
        for run in _VALUE_RUN.findall(text, start, end)
        if _DIGIT.search(run) and _LETTER.search(run) or run.isdigit() and len(run) >= 12
    }
    repeats = []
    for value in values:
        position = text.find(value)
        while position >= 0:
            repeats.append(Finding(position, position + len(value), "repeat of a secret"))
            position = text.find(value, position + len(value))
    return repeats


# --- redacting ------------------------------------------------------------------------------


def _runs(found: Iterable[Finding]) -> list[tuple[int, int, bool]]:
    """FOUND merged into runs (start, end, tail): a run is a tail when one tail covers it
    all (the rest of a secret cut by a break, even where a rule also found that part)."""
    runs: list[list] = []
    for start, end, _, tail in sorted(found):
        if runs and start <= runs[-1][1]:
            runs[-1][1] = max(runs[-1][1], end)
            runs[-1][2].append((start, end, tail))
        else:
            runs.append([start, end, [(start, end, tail)]])
    return [
        (start, end, any(tail and low <= start and high >= end for low, high, tail in members))
        for start, end, members in runs
    ]


def _redact(text: str, spans: Sequence[Span]) -> str:
    return _replace(text, [(start, end, False) for start, end in spans])


def _replace(text: str, runs: Sequence[tuple[int, int, bool]]) -> str:
    pieces, position = [], 0
    for start, end, tail in runs:
        pieces.append(text[position:start])
        pieces.append("" if tail else REDACTED)
        position = end
    pieces.append(text[position:])
    return "".join(pieces)


def scrub(text: str) -> str:
    """TEXT with every secret replaced by `[redacted]`."""
    if not text:
        return text
    return _replace(text, _runs(findings(text)))


def scrub_turns(texts: Sequence[str]) -> list[str]:
    """TEXTS (pieces of one conversation or stream, in order) each scrubbed, and a secret
    that only appears when neighbours are put back together (a key split across two turns
    or deltas, even at a dot or a dash) redacted too: `[redacted]` where it starts, the
    rest of it removed from the pieces that follow.

    Two scans whatever the number of pieces: the pieces one per line (each piece's own
    secrets, and a token cut at a boundary, read across it as across any line break), and
    the pieces run together (what a neighbour's words reveal, such as a key named at the
    end of one turn and written in the next). A run-together assignment that only widens
    its key backwards (`more` + `token=abc` read as the key `moretoken`), or a secret
    that a word before it joins (`more` + `sgp_…`), is not a split secret.

    A piece that ends in a redaction, followed by one that goes on without a space in
    letters and digits, was cut inside a secret: that run is its tail and goes too (the
    head may have been scrubbed on its own when it was captured, see `scrub_captured`)."""
    pieces = list(texts)
    if len(pieces) < 2:
        return [scrub(piece) for piece in pieces]
    starts = [0]  # of each piece in the pieces run together
    for piece in pieces[:-1]:
        starts.append(starts[-1] + len(piece))
    redact: list[list[Span]] = [[] for _ in pieces]
    remove: list[list[Span]] = [[] for _ in pieces]
    own_ends = set()
    lined = [start + index for index, start in enumerate(starts)]  # one per line
    for start, end, tail in _runs(findings("\n".join(pieces))):
        for index in _touched(lined, pieces, start, end):
            local = (max(start - lined[index], 0), min(end - lined[index], len(pieces[index])))
            (remove if tail else redact)[index].append(local)
            own_ends.add(starts[index] + local[1])
    # Run together, only what a neighbour's words reveal is new: the breaks inside tokens
    # are the ones the scan above read across.
    for start, end, _ in _runs(findings("".join(pieces), joins=False)):
        touched = _touched(starts, pieces, start, end)
        if len(touched) > 1 and (end in own_ends or _WORD_BEFORE.search(pieces[touched[0]][-14:])):
            continue  # found on its own, or only widened backwards over a word
        for order, index in enumerate(touched):
            local = (max(start - starts[index], 0), min(end - starts[index], len(pieces[index])))
            (remove if order else redact)[index].append(local)
    scrubbed = [
        _cut(piece, _merged(redact[i]), remove[i]) if redact[i] or remove[i] else piece
        for i, piece in enumerate(pieces)
    ]
    for index in range(1, len(scrubbed)):
        if scrubbed[index - 1].endswith(REDACTED):
            tail = _TAIL.match(scrubbed[index])
            if tail and _DIGIT.search(tail.group()) and _LETTER.search(tail.group()):
                scrubbed[index] = scrubbed[index][tail.end() :]
    return scrubbed


def _touched(starts: Sequence[int], pieces: Sequence[str], start: int, end: int) -> list[int]:
    """The pieces (placed at STARTS) that START:END overlaps."""
    index = max(bisect.bisect_right(starts, start) - 1, 0)
    touched = []
    while index < len(pieces) and starts[index] < end:
        if start < starts[index] + len(pieces[index]):
            touched.append(index)
        index += 1
    return touched


# How much of what was captured just before a new turn is scrubbed with it: more than
# any token that can be cut between two turns.
CAPTURE_CONTEXT = 2048


def scrub_captured(earlier: Sequence[dict], added: Sequence[dict]) -> list[dict]:
    """Scrub the "text" of each turn in ADDED (turns being captured) in place, together
    with the last CAPTURE_CONTEXT characters of EARLIER (turns already stored, in order,
    scrubbed when they were captured): a secret cut between them is found
    (`scrub_turns`). Returns copies of the turns of EARLIER whose text changed."""
    context: list[tuple[dict, str]] = []  # (turn, the part of it scrubbed again)
    size = 0
    for turn in reversed(earlier):
        if size >= CAPTURE_CONTEXT:
            break
        text = turn["text"]
        cut = max(len(text) - (CAPTURE_CONTEXT - size), 0)
        if cut:  # start the window at whitespace, never inside a token
            space = _WHITESPACE.search(text, cut)
            cut = space.end() if space else len(text)
        context.insert(0, (turn, text[cut:]))
        size += len(text) - cut
    pieces = [part for _, part in context] + [turn["text"] for turn in added]
    scrubbed = scrub_turns(pieces)
    for turn, text in zip(added, scrubbed[len(context) :], strict=True):
        turn["text"] = text
    changed = []
    for (turn, part), text in zip(context, scrubbed, strict=False):
        if text != part:
            head = turn["text"][: len(turn["text"]) - len(part)]
            changed.append({**turn, "text": head + text})
    return changed


def _merged(spans: Iterable[Span]) -> list[Span]:
    return [(start, end) for start, end, _ in _runs(Finding(s, e, "") for s, e in spans)]


def _cut(text: str, redact: Sequence[Span], remove: Sequence[Span]) -> str:
    """TEXT with REDACT spans replaced by `[redacted]` and the REMOVE spans (the tail of a
    secret that began in an earlier piece) dropped, unless a redaction covers them."""
    runs = [(start, end, False) for start, end in redact]
    runs += [
        (start, end, True)
        for start, end in _merged(remove)
        if not any(a < end and start < b for a, b in redact)
    ]
    return _replace(text, sorted(runs))
