"""Our own rules for secrets, the layer beside the engine (`secrets_engine`): what a
maintained engine does not see or does not know yet.

Each `Rule` has a name (kept with every finding, to say why a span went, and for the
tests) and yields spans. In the order of `RULES` (spans of rules that YIELD give way to
earlier ones):
- structure: private-key blocks of every armour (PEM, OpenSSH, PGP, PuTTY), credentials
  in a URL (`scheme://user:pass@host` keeps scheme and host), command-line and URL
  parameter credentials, webhooks that are themselves the secret (Slack, Discord, Teams);
- provider formats: 91 rules for the published prefixes and shapes of tokens, password
  hashes (`$2a$`, `$6$`, `$krb5asrep$`), plus any `prefix_` token whose body is random
  (new vendors follow that shape);
- context: a credential assignment (`password=…`, `"api_key": "…"`) is redacted key and
  value together when the value is a literal, never when it names a variable
  (`access_token=access_token`, `self.password`); a random-looking value within a short
  distance after a credential word is redacted alone, so prose around it stays;
- e-mail addresses (the original's rule), but not SSH remotes (`git@host:path`).

A rule's regex compiles on first use, and only if one of its keywords is in the text, so
importing this module costs nothing and ordinary text meets only a few rules. Every
repetition is bounded, so no input costs quadratic time.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Sequence
from functools import cache

Span = tuple[int, int]


class Rule:
    """A named way to find secrets: a regex run when one of KEYWORDS is in the text
    (compared lower-cased unless the keyword has capitals; none: always), an optional CHECK that
    vetoes a match (returning None) or narrows it to the span to redact, and whether its
    matches YIELD to overlapping ones of earlier rules."""

    __slots__ = (
        "name", "keywords", "source", "flags", "check", "yields", "word_start", "anchors", "reach",
        "starts",
    )  # fmt: skip

    def __init__(
        self,
        name: str,
        keywords: Sequence[str],
        source: str,
        flags: int = 0,
        check: Callable[[re.Match], Span | None] | None = None,
        yields: bool = False,
        anchors: Sequence[str] = (),
        reach: int = 0,
        starts: str = "",
    ) -> None:
        self.name, self.keywords, self.flags = name, tuple(keywords), flags
        self.check = check
        self.yields = yields  # its matches give way to what earlier rules found
        # A leading `\b` is checked here rather than by the regex: a pattern that starts
        # with a literal is searched for many times faster.
        self.word_start = source.startswith("\\b")
        self.source = source[2:] if self.word_start else source
        # With ANCHORS (lower-case words a match starts with), the regex is tried only
        # where one of them is: a scan for words is far faster than a regex scan. With a
        # REACH, a match may start up to that many characters after an anchor instead;
        # STARTS is a regex for where a match may begin, searched within that reach.
        self.anchors, self.reach, self.starts = tuple(anchors), reach, starts

    def _matches(self, text: str) -> Iterator[re.Match]:
        pattern = _compiled(self.source, self.flags)
        if not self.anchors:
            yield from pattern.finditer(text)
            return
        lowered = text.lower()
        if len(lowered) != len(text):  # a few characters lower-case to two
            yield from pattern.finditer(text)
            return
        positions = set()
        for anchor in self.anchors:
            position = lowered.find(anchor)
            while position >= 0:
                positions.add(position + len(anchor) if self.reach else position)
                position = lowered.find(anchor, position + 1)
        if self.reach:
            yield from self._matches_within_reach(pattern, text, sorted(positions))
            return
        reached = 0
        for position in sorted(positions):
            if position < reached:
                continue
            match = pattern.match(text, position)
            if match:
                reached = match.end()
                yield match

    def _matches_within_reach(
        self, pattern: re.Pattern, text: str, positions: list[int]
    ) -> Iterator[re.Match]:
        windows: list[list[int]] = []
        for position in positions:
            if windows and position <= windows[-1][1]:
                windows[-1][1] = position + self.reach
            else:
                windows.append([position, position + self.reach])
        starts = _compiled(self.starts, self.flags)
        reached = 0
        for start, end in windows:
            for found in starts.finditer(text, max(start, reached), end + 1):
                if found.start() < reached:
                    continue
                match = pattern.match(text, found.start())
                if match:
                    reached = match.end()
                    yield match

    def spans(self, text: str) -> Iterator[Span]:
        for match in self._matches(text):
            start = match.start()
            if self.word_start and start and (text[start - 1].isalnum() or text[start - 1] == "_"):
                continue
            span = self.check(match) if self.check else _secret_span(match)
            if span is not None and span[0] < span[1]:
                yield span


@cache
def _compiled(source: str, flags: int) -> re.Pattern:
    return re.compile(source, flags)


class LazyRegex:
    """A regex compiled on first use: importing this module compiles nothing."""

    __slots__ = ("source", "flags")

    def __init__(self, source: str, flags: int = 0) -> None:
        self.source, self.flags = source, flags

    def __getattr__(self, name: str):
        return getattr(_compiled(self.source, self.flags), name)


def _secret_span(match: re.Match) -> Span | None:
    """The `secret` group's span if the pattern has one, else the whole match; None for
    placeholders (`xoxb-xxxxxxxx`, `AKIAXXXXXXXXXXXXXXXX`)."""
    span = match.span("secret") if "secret" in match.re.groupindex else match.span()
    return None if _is_placeholder(match.string[span[0] : span[1]]) else span


_PLACEHOLDER_CHARS = set("xX*.#0-_")


def _is_placeholder(value: str) -> bool:
    if len(value) < 3:
        return False
    filler = sum(char in _PLACEHOLDER_CHARS for char in value)
    return filler * 2 >= len(value) or value.lower().count("xxxx") >= 2


# --- what a random value looks like ------------------------------------------------------


def _entropy(value: str) -> float:
    counts: dict[str, int] = {}
    for char in value:
        counts[char] = counts.get(char, 0) + 1
    size = len(value)
    return -sum(count / size * math.log2(count / size) for count in counts.values())


def _char_class(char: str) -> int:
    return 0 if char.islower() else 1 if char.isupper() else 2 if char.isdigit() else 3


def _looks_random(value: str, minimum: int = 16) -> bool:
    """Whether VALUE reads as a generated key rather than a word, name, path or number:
    long enough, letters and digits mixed often (identifiers change class rarely), and
    enough distinct characters."""
    core = value.strip("=")
    if len(core) < minimum or _is_placeholder(core):
        return False
    classes = [_char_class(char) for char in core]
    if 2 not in classes or not ({0, 1} & set(classes)):
        # No digit or no letter: only a mixed-case run with capitals together passes
        # (base64 of letters), not a CamelCaseName.
        if not (0 in classes and 1 in classes and len(core) >= 20):
            return False
        if len(re.findall(r"[A-Z]{2,}", core)) < 2:
            return False
    changes = sum(1 for left, right in zip(classes, classes[1:], strict=False) if left != right)
    if changes * 6 < len(core):
        return False
    return _entropy(core) >= (3.0 if len(core) < 24 else 3.4)


_HEX = LazyRegex(r"[0-9a-fA-F]+")
_UUID = LazyRegex(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")


def _is_plain_identifier(value: str) -> bool:
    """A hash or UUID: ordinary in prose (commits, objects, ids) unless it is assigned."""
    return bool(_HEX.fullmatch(value) and len(value) in (7, 8, 12, 40, 64)) or bool(
        _UUID.fullmatch(value)
    )


# --- credential assignments --------------------------------------------------------------

_CREDENTIAL_WORDS = (
    r"api[_-]?key|apikey|token|secret|password|passwd|passphrase|pwd|authorization|bearer"
    r"|secret[_-]?access[_-]?key|access[_-]?key|client[_-]?secret|private[_-]?key"
    r"|account[_-]?key|shared[_-]?access[_-]?key|credentials?|auth|sig"
)
# A key ends in a credential word (`DB_PASSWORD`, `authToken`, `"api_key"`), so
# `token_count` or `max_tokens` never counts.
_CREDENTIAL_ANCHORS = (
    "api", "token", "secret", "pass", "pwd", "auth", "bearer", "access", "client",
    "private", "account", "shared", "credential", "sig",
)  # fmt: skip
# The regex starts at the credential word (a scan for a word is fast); `_assignment`
# widens the match back over the rest of the key.
_ASSIGNMENT_SOURCE = (
    r"(?:" + _CREDENTIAL_WORDS + r")\b"
    r"(?P<closing>[\"']?)(?P<separator>[ \t]*(?<![=!<>])(?::=|=>|[=:])(?![=:/])[ \t]*)"
    r"(?P<value>\"[^\"\n]{0,500}\"|'[^'\n]{0,500}'|`[^`\n]{0,500}`|[^\s\"'`&;,]{1,500})"
)
KEY_START = LazyRegex(r"[\"']?(?:" + _CREDENTIAL_WORDS + r")\b", re.IGNORECASE)
_CODE_START = LazyRegex(r"[A-Za-z_][\w.:]*[(\[<]|[$<{(\[%*&#]")
_IDENTIFIER = LazyRegex(r"[A-Za-z_]\w*")
_DOTTED_NAME = LazyRegex(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
_DIGIT = LazyRegex(r"\d")
_LETTER = LazyRegex(r"[A-Za-z]")
_NAMES_A_CREDENTIAL = LazyRegex(r"(?i)" + _CREDENTIAL_WORDS)
_NON_SECRET_WORDS = {"none", "null", "nil", "true", "false", "undefined", "required", "optional"}


def _assignment(match: re.Match) -> Span | None:
    """The whole assignment, if its value is a literal (a secret) rather than code or prose:
    a call or subscript (`getpass()`, `headers["x"]`), an attribute (`os.environ`), a
    placeholder (`$TOKEN`, `${{ secrets.X }}`, `<your key>`, `xxxx`), a type (`&str`),
    a variable on the right of a spaced `=` (`token = new_token`, under 32 characters) or
    one that names a credential itself (`access_token=access_token`, `self.password`), a
    literal like `None`, an alphabetic word after `: ` (`token: str`), or a number. The
    brackets and punctuation that close the code around the value are never part of it."""
    value, separator = match.group("value"), match.group("separator")
    text, start = match.string, match.start()
    floor = max(0, start - 40)
    while start > floor and (text[start - 1].isalnum() or text[start - 1] in "_.-"):
        start -= 1
    if start > 0 and text[start - 1] in "\"'":
        start -= 1
    if value[0] in "\"'`":
        inner = value[1:-1].strip()
        if not inner or inner[0] in "$<{%" or inner.startswith("*") or _is_placeholder(inner):
            return None
        return start, match.end()
    bare = value.rstrip(".,:;)]}>")
    if not bare or _CODE_START.match(bare) or _is_placeholder(bare) or bare.isdigit():
        return None
    if _IDENTIFIER.fullmatch(bare) and len(bare) < 32 and not _DIGIT.search(bare):
        if _NAMES_A_CREDENTIAL.search(bare):
            return None  # a variable named for what it holds: `token=access_token`
    if bare.lower() in _NON_SECRET_WORDS or _DOTTED_NAME.fullmatch(bare):
        return None
    if "=" in separator and separator[0].isspace() and _IDENTIFIER.fullmatch(bare):
        if len(bare) < 32:
            return None  # `token = new_token` names a variable; long runs are keys
    if ":" in separator and separator[-1].isspace() and bare.isalpha():
        # `token: str`, `Authorization: required`; a long random run of letters is a key.
        if len(bare) < 16 or bare.islower() or bare.istitle():
            return None
    if match.group(0).lower().startswith(("auth", "sig")) and len(bare) < 8:
        return None  # `auth=basic`, `sig=1`: too short to be the credential itself
    return start, match.start("value") + len(bare)


# --- a random value near a credential word ----------------------------------------------

_NEAR_WORDS = LazyRegex(
    r"(?i)(?:key|token|secret|passw|pwd|pass\b|auth|credential|bearer|signature|licen[cs]e"
    r"|session|cookie|webhook|\bsid\b|\bdsn\b|\bpat\b)"
)
_CANDIDATE = r"(?<![\w+/.~-])\w[A-Za-z0-9+/_.~-]{14,8000}[A-Za-z0-9]={0,2}(?![\w+/~-])"
_NEAR_ANCHORS = (
    "key", "token", "secret", "pass", "pwd", "auth", "credential", "bearer", "signature",
    "licen", "session", "cookie", "webhook", "sid", "dsn", "pat",
)  # fmt: skip
_NAMED_JUST_BEFORE = LazyRegex(
    r"(?i)(?:key|token|secret|passw\w*|pwd|auth|credential|bearer|access|private)"
    r"[\"']?\s*(?::=|=>|[=:]|\s)\s*[\"'`]?\Z"
)
_OPERATOR_BEFORE = LazyRegex(r"(?:[=:>]|=>|:=|[\"'],)\s*[\"'`]?\Z")


def _near_credential_word(match: re.Match) -> Span | None:
    value = match.group(0).rstrip(".")
    if "://" in match.string[match.end() : match.end() + 3] or value.count(".") > 3:
        return None
    if _DOTTED_NAME.fullmatch(value):
        return None  # `rust_openssl.x448.X448PublicKey` names code
    text, start = match.string, match.start()
    before = text[max(0, start - 80) : start]
    paragraph = before.rfind("\n\n")
    if paragraph >= 0:
        before = before[paragraph + 2 :]
    if not _looks_random(value.replace("-", "").replace("_", "").replace(".", ""), 14):
        # A made-up key (`abcdef1234567890…`) right after its name is still a key.
        if not (_key_shaped(value) and _NAMED_JUST_BEFORE.search(before)):
            return None
    if not _NEAR_WORDS.search(before):
        return None
    if _is_plain_identifier(value) and not _OPERATOR_BEFORE.search(before):
        return None
    return start, start + len(value)


def _named_in_prose(match: re.Match) -> Span | None:
    """`The API token is test_abc…1`: what a sentence says is a key, if it has letters and
    digits and is not a path, URL, name or placeholder."""
    value = match.group("secret").rstrip(".,;:)")
    if "://" in value or "/" in value.strip("/") and value.count("/") > 1:
        return None
    if not (_DIGIT.search(value) and _LETTER.search(value)) or _is_placeholder(value):
        return None
    if _DOTTED_NAME.fullmatch(value) or _is_plain_identifier(value):
        return None
    start = match.start("secret")
    return start, start + len(value)


# --- a prefixed token with a random body ------------------------------------------------

_PREFIX_NOT_SECRETS = {"sha1", "sha256", "sha384", "sha512", "md5", "base64", "utf8", "x86"}


def _prefixed_random(match: re.Match) -> Span | None:
    if match.group("prefix").lower() in _PREFIX_NOT_SECRETS:
        return None
    body = match.group("body")
    longest = max(_SEPARATORS.split(body), key=len)
    joined = _SEPARATORS.sub("", body)
    if _looks_random(longest, 16) or _key_shaped(longest) or _looks_random(joined, 24):
        return match.span()
    return None


_SEPARATORS = LazyRegex(r"[_-]")


def _key_shaped(body: str) -> bool:
    """A body long enough to be a key and made of letters and digits both, as made-up
    keys in examples are (`sk_1234567890abcdef…`): no word or name is like that."""
    if len(body) < 24 or _is_placeholder(body):
        return False
    digits = sum(char.isdigit() for char in body)
    return digits >= 4 and len(body) - digits >= 4


# --- the original's e-mail rule, kept for SSH remotes ------------------------------------


def _email(match: re.Match) -> Span | None:
    text, start, end = match.string, match.start(), match.end()
    if text.endswith("://", 0, start):
        return None  # the user name of a URL without a password (ssh://git@host)
    if text.startswith(":", end) and end + 1 < len(text) and not text[end + 1].isspace():
        return None  # an scp-style SSH remote (git@host:path)
    return match.span()


def _url_credentials(match: re.Match) -> Span | None:
    if _is_placeholder(match.group("credentials").split(":")[-1]):
        return None
    return match.span("credentials")


_KEY = r"[A-Za-z0-9_-]"


def _token(name: str, keywords: Sequence[str], source: str, flags: int = 0) -> Rule:
    return Rule(name, keywords, source, flags)


# Provider formats from their published documentation (and the formats the field's
# scanners document): (name, keywords, regex). The regexes are ours.
_PROVIDERS: list[Rule] = [
    _token(
        "aws access key id",
        ("AKIA", "ASIA", "ABIA", "ACCA", "A3T"),
        r"\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b",
    ),
    _token("aws appsync key", ("da2-",), r"\bda2-[a-z0-9]{26}\b"),
    _token("aws bedrock key", ("ABSK",), r"\bABSK[A-Za-z0-9+/]{100,300}={0,2}"),
    _token(
        "github token",
        ("gh", "github_pat_"),
        r"\b(?:gh[pousr]_[A-Za-z0-9]{30,255}|github_pat_[A-Za-z0-9_]{22,255})\b",
    ),
    _token(
        "gitlab token",
        ("gl", "GR1348941"),
        r"\b(?:gl(?:pat|dt|ptt|rt|cbt|imt|agent|soat|ffct|oas|ft|wt|cf)-[A-Za-z0-9_=-]{20,}"
        r"|GR1348941[A-Za-z0-9_-]{20,})",
    ),
    _token("slack token", ("xox",), r"\bxox[a-z]-(?:\d+-){0,4}[A-Za-z0-9-]{8,}"),
    _token("slack app token", ("xapp-",), r"\bxapp-\d*-?[A-Za-z0-9/-]{20,}"),
    _token(
        "slack webhook",
        ("hooks.slack.com",),
        r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/_-]{20,}",
    ),
    _token(
        "discord webhook",
        ("discord",),
        r"https?://(?:\w+\.)?discord(?:app)?\.com/api/webhooks/\d+/[\w-]+",
    ),
    _token(
        "teams webhook",
        ("webhook.office.com", "outlook.office.com/webhook"),
        r"https?://[\w.-]*(?:webhook\.office\.com/webhookb2|outlook\.office\.com/webhook)/[\w@/-]+",
    ),
    _token(
        "stripe key",
        ("k_live_", "k_test_", "k_prod_", "whsec_"),
        r"\b(?:[sr]k_(?:live|test|prod)_[A-Za-z0-9]{10,255}|whsec_[A-Za-z0-9]{24,})\b",
    ),
    _token("anthropic key", ("sk-ant-",), r"sk-ant-" + _KEY + r"{8,}"),
    _token("openai-style key", ("sk-",), r"\bsk-(?!ant-)" + _KEY + r"{8,}"),
    _token("google api key", ("AIza",), r"\bAIza" + _KEY + r"{35}(?![A-Za-z0-9_-])"),
    _token("google oauth client secret", ("GOCSPX-",), r"\bGOCSPX-[\w-]{28}"),
    _token("google oauth token", ("ya29.",), r"\bya29\.[\w-]{20,}"),
    _token("google refresh token", ("1//0",), r"\b1//0[\w-]{40,}"),
    _token("azure client secret", ("Q~",), r"(?<![\w~.-])[\w~.]{3}\dQ~[\w~.-]{31,34}"),
    _token(
        "json web token",
        ("eyJ",),
        r"\beyJ[A-Za-z0-9_-]{8,}\.(?:[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*|eyJ[A-Za-z0-9_-]{8,})"
        r"(?![A-Za-z0-9_-])",
    ),
    _token("base64 json key", ("eyJ",), r"\b(?:ops_)?eyJ[A-Za-z0-9+/]{60,}={0,2}"),
    _token("npm token", ("npm_",), r"\bnpm_[A-Za-z0-9]{36}\b"),
    _token("pypi token", ("pypi-",), r"\bpypi-AgE[\w-]{50,}"),
    _token("sendgrid key", ("SG.",), r"\bSG\.[\w-]{20,24}\.[\w-]{40,46}"),
    _token("twilio key", ("SK", "AC"), r"\b(?:SK[0-9a-fA-F]{32}|AC[0-9a-f]{32})\b"),
    _token("mailgun key", ("key-",), r"\bkey-[0-9a-zA-Z]{32}\b"),
    _token("mailchimp key", ("-us",), r"\b[0-9a-f]{32}-us\d{1,2}\b"),
    _token("shopify token", ("shp",), r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b"),
    _token("digitalocean token", ("_v1_",), r"\bdo[opr]_v1_[a-f0-9]{64}\b"),
    _token("databricks token", ("dapi",), r"\bdapi[a-fA-F0-9]{32}(?:-\d)?\b"),
    _token(
        "doppler token",
        ("dp.",),
        r"\bdp\.(?:pt|st|ct|sa|scim|audit)\.(?:[a-z0-9_-]{1,24}\.)?[A-Za-z0-9]{40,44}",
    ),
    _token("dynatrace token", ("dt0c01.",), r"\bdt0c01\.[A-Z0-9]{24}\.[A-Z0-9]{64}"),
    _token("vault token", ("hvs.", "hvb.", "hvr."), r"\bhv[sbr]\.[\w-]{24,}"),
    _token("terraform token", ("atlasv1",), r"\b[a-z0-9]{14}\.atlasv1\.[a-z0-9_=-]{60,70}"),
    _token("postman key", ("PMAK-",), r"\bPMAK-[a-f0-9]{24}-[a-f0-9]{34}"),
    _token("atlassian token", ("ATATT", "ATCTT"), r"\bAT[AC]TT[A-Za-z0-9_=-]{24,}"),
    _token("grafana cloud token", ("glc_",), r"\bglc_[A-Za-z0-9+/]{32,400}={0,2}"),
    _token("grafana service token", ("glsa_",), r"\bglsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}"),
    _token("grafana api key", ("eyJrIjoi",), r"\beyJrIjoi[A-Za-z0-9]{70,400}={0,2}"),
    _token("hugging face token", ("hf_", "api_org_"), r"\b(?:hf|api_org)_[A-Za-z]{34}\b"),
    _token(
        "new relic key",
        ("NRAK-", "NRJS-", "NRII-", "NRAA-", "NRIQ-", "NRBR-", "NRRA-", "NRSP-"),
        r"\bNR(?:AK|JS|II|AA|IQ|BR|RA|SP)-[A-Za-z0-9_-]{19,}",
    ),
    _token("square token", ("sq0",), r"\bsq0(?:atp|csp)-[\w-]{22,43}"),
    _token("square access token", ("EAAA",), r"\bEAAA[\w+=-]{60}"),
    _token("telegram bot token", (":AA",), r"\b\d{8,10}:AA[\w-]{33}\b"),
    _token("facebook token", ("EAA",), r"\bEAA[A-Za-z0-9]{90,}"),
    _token("age secret key", ("AGE-SECRET-KEY-1",), r"AGE-SECRET-KEY-1[0-9A-Z]{58}"),
    _token("alibaba key", ("LTAI",), r"\bLTAI[A-Za-z0-9]{20}\b"),
    _token("bitbucket app password", ("ATBB",), r"\bATBB[A-Za-z0-9_=.-]{28,}"),
    _token("clojars token", ("CLOJARS_",), r"\bCLOJARS_[a-z0-9]{60}"),
    _token("cloudflare origin key", ("v1.0-",), r"\bv1\.0-[a-z0-9]{24,64}(?:-[a-f0-9]{10,146})+"),
    _token("dropbox token", ("sl.",), r"\bsl\.(?:u\.)?[\w=-]{130,}"),
    _token("easypost key", ("EZAK", "EZTK"), r"\bEZ[AT]K[a-zA-Z0-9]{54}"),
    _token(
        "fly.io token",
        ("fm1", "fm2", "fo1_", "FlyV1"),
        r"\bfm[12][ar]?_[\w+/]{100,}={0,3}",
    ),
    _token("fly.io org token", ("fo1_",), r"\bfo1_[\w-]{43}"),
    _token(
        "fly.io macaroon",
        ("FlyV1",),
        r"\bFlyV1 fm[12][ar]?_[\w+/]{100,}={0,3}",
    ),
    _token(
        "harness token",
        ("pat.", "sat."),
        r"\b(?:pat|sat)\.[\w-]{22}\.[a-z0-9]{24}\.[a-zA-Z0-9]{20}",
    ),
    _token("heroku key", ("HRKU-",), r"\bHRKU-[\w-]{60,}"),
    _token(
        "1password key",
        ("A3-",),
        r"\bA3-[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}",
    ),
    _token("artifactory key", ("AKCp",), r"\bAKCp[A-Za-z0-9]{69}"),
    _token("artifactory reference token", ("cmVmdGtu",), r"\bcmVmdGtu[A-Za-z0-9]{56,}"),
    _token("octopus key", ("API-",), r"\bAPI-[A-Z0-9]{26}\b"),
    _token("openshift token", ("sha256~",), r"\bsha256~[\w-]{43}"),
    _token("nuget key", ("oy2",), r"\boy2[a-z0-9]{43}\b"),
    _token("mapbox token", ("k.eyJ",), r"\b[pst]k\.eyJ[\w-]+\.[\w-]+"),
    _token("twitter bearer", ("AAAAAAAAAAAAAAAAAAAAA",), r"\bA{22}[A-Za-z0-9%]{30,}"),
    _token("yandex api key", ("AQVN",), r"\bAQVN[\w-]{35,38}\b"),
    _token("yandex access key", ("YC",), r"\bYC[\w-]{38}\b"),
    _token("yandex token", ("y0_", "y1_", "y2_", "y3_"), r"\by[0-3]_[\w-]{55,}"),
    _token("discord bot token", (".",), r"\b[MNO][A-Za-z\d]{23,27}\.[\w-]{6}\.[\w-]{27,40}\b"),
    _token("flutterwave key", ("FLW",), r"\bFLW(?:PUBK|SECK)(?:_TEST)?-[a-h0-9]{32}-X"),
    _token("lob key", ("live_", "test_"), r"\b(?:live|test)_(?:pub_)?[a-f0-9]{35}\b"),
    _token(
        "ibm/cloud api key", ("ibm",), r"(?i)\bibm[\w.-]{0,20}[\s:=\"']{1,6}[A-Za-z0-9_-]{44}\b"
    ),
    _token(
        "password hash",
        ("$",),
        # crypt(3) and hashcat formats: md5/bcrypt/sha-crypt/scrypt/yescrypt/argon2,
        # Kerberos AS-REP and TGS hashes.
        r"(?<![\w$])\$(?:1|2[abxy]?|5|6|7|8|9|y|gy|sha1|md5|apr1|argon2(?:id|i|d)|scrypt"
        r"|pbkdf2(?:-sha\d+)?|krb5(?:asrep|tgs|pa)|P|H)\$[./A-Za-z0-9$=,:@+*_-]{8,600}",
    ),
    _token("docker token", ("dckr_",), r"\bdckr_(?:pat|oat)_[\w-]{27,32}"),
    _token(
        "sourcegraph token",
        ("sgp_", "sgs_"),
        r"\bsg[ps]_(?:[a-fA-F0-9]{16}_)?(?:local_)?[a-fA-F0-9]{40,64}\b",
    ),
    _token("django secret key", ("django-insecure-",), r"django-insecure-[^\s'\"`]{20,100}"),
    _token("circleci token", ("CCIPAT_", "CCIPRJ_"), r"\bCCIP(?:AT|RJ)_[A-Za-z0-9_]{30,}"),
    _token("tailscale key", ("tskey-",), r"\btskey-[\w-]{12,}"),
    _token("base64 private key", ("LS0tLS1CRUdJTi",), r"\bLS0tLS1CRUdJTi[A-Za-z0-9+/]{20,}={0,2}"),
    _token("crates.io token", ("cio",), r"\bcio[A-Za-z0-9]{32}\b"),
    _token("airtable token", ("pat",), r"\bpat[A-Za-z0-9]{14}\.[a-f0-9]{64}\b"),
    _token("bitbucket data center token", ("BBDC-",), r"\bBBDC-[A-Za-z0-9+/@_-]{40,}"),
    _token("salesforce token", ("3MVG9",), r"\b3MVG9[A-Za-z0-9._]{50,}"),
    _token("telnyx key", ("KEY",), r"\bKEY[A-Za-z0-9]{16,40}[_-][A-Za-z0-9_-]{20,40}"),
    _token("zoho token", ("1000.",), r"\b1000\.[a-f0-9]{32}\.[a-f0-9]{32}\b"),
    _token("shutterstock token", ("v2/",), r"(?<![\w/])v2/[A-Za-z0-9]{60,}"),
    _token("fullstory key", ("na1.",), r"\bna1\.[A-Za-z0-9+/]{60,}={0,2}"),
    _token("voiceflow key", ("VF.",), r"\bVF\.[A-Z]{2}\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{16}"),
    _token("stackhawk key", ("hawk.",), r"\bhawk\.[A-Za-z0-9_-]{20}\.[A-Za-z0-9_-]{20}"),
    _token(
        "uuid-shaped key",
        ("pub-c-", "sub-c-", "px-", "api-", "sdk-", "mob-", "pat-", "access-", "amzn.mws."),
        # PubNub, Pixie, LaunchDarkly, HubSpot, Plaid, Amazon MWS: a prefix and a UUID.
        r"\b(?:(?:pub|sub)-c|px-(?:api|dep)|api|sdk|mob|pat-(?:na|eu|ap)\d"
        r"|access-(?:sandbox|development|production)|amzn\.mws)"
        r"-?[.]?[a-z0-9]{8}-[a-z0-9]{4}-[a-z0-9]{4}-[a-z0-9]{4}-[a-z0-9]{12}\b",
    ),
    _token("contentful token", ("CFPAT-",), r"\bCFPAT-[A-Za-z0-9_-]{43}"),
    _token("facebook test token", ("EAACEdEose0cBA",), r"\bEAACEdEose0cBA[A-Za-z0-9]{20,}"),
]

_RULES_BEFORE_PROVIDERS: list[Rule] = [
    Rule(
        "private key block",
        ("private key", "private-lines"),
        # Through the END line if there is one, else the base64 lines that follow (a
        # block cut short is still removed, up to the prose after it). JSON escapes its
        # newlines (`\n`), a service-account file for instance.
        r"-----BEGIN[ A-Z0-9_-]{0,30}PRIVATE KEY(?: BLOCK)?-----"
        r"(?:.{0,20000}?-----END[ A-Z0-9_-]{0,30}PRIVATE KEY(?: BLOCK)?-----"
        r"|(?:(?:\r?\n|\\n)[A-Za-z0-9+/=:, -]{1,200}(?=\r?\n|\\n|$|\"))*)"
        r"|Private-Lines: \d+(?:\r?\n[A-Za-z0-9+/=]{1,100})+",
        re.DOTALL | re.IGNORECASE,
    ),
    Rule(
        "url credentials",
        ("@",),
        r"\b[A-Za-z][A-Za-z0-9+.-]{0,31}://"
        r"(?P<credentials>[^\s/@:\"'<>]{1,256}:[^\s/@\"'<>]{1,256}|[^\s/@:\"'<>]{16,256})@",
        check=_url_credentials,
    ),
    Rule(
        "command-line credentials",
        ("-u", "--user", "-p", "--password", "--token", "--api-key", "--secret"),
        # `curl -u user:pass`, `docker login -u me -p pass`, `--password=pass`
        r"(?:\s(?:-u|--user)[ =]+(?P<user>[^\s:]{0,200}:[^\s]{3,200})"
        r"|\b(?:docker|podman|helm|oras|buildah|skopeo) login\b[^\n]{0,200}?\s-p[ =]"
        r"|\s--(?:password|token|api-key|secret|client-secret)[ =])"
        r"(?(user)|['\"]?(?P<value>[^\s'\"-][^\s'\"]{5,}))",
        check=lambda match: match.span("user") if match.group("user") else match.span("value"),
    ),
    Rule(
        "url parameter credentials",
        ("=",),
        r"(?i)[?&;](?:access_token|api_key|apikey|auth|key|pass|password|secret|sig|signature"
        r"|token|client_secret)=(?P<secret>[^\s&#\"'<>]{8,})",
    ),
]

_RULES_AFTER_PROVIDERS: list[Rule] = [
    Rule(
        "e-mail address",
        ("@",),
        r"\b[A-Za-z0-9._%+-]{1,64}@(?!\d+x\.)[A-Za-z0-9.-]{1,253}\.[A-Za-z]{2,}\b",
        check=_email,
        yields=True,  # `https://bob:x@host.example.com` keeps its host
    ),
    Rule(
        "credential assignment",
        ("key", "token", "secret", "pass", "pwd", "auth", "bearer", "credential", "sig"),
        _ASSIGNMENT_SOURCE,
        re.IGNORECASE,
        check=_assignment,
        anchors=_CREDENTIAL_ANCHORS,
    ),
    Rule(
        "bearer credential",
        ("bearer", "basic", "token "),
        r"\b(?:Bearer|Basic|token)\s+(?P<secret>(?=[A-Za-z0-9._~+/=-]*\d)[A-Za-z0-9._~+/=-]{12,})",
        re.IGNORECASE,
        anchors=("bearer", "basic", "token"),
    ),
    Rule(
        "prefixed random token",
        ("_", "-"),
        r"\b(?P<prefix>[A-Za-z][A-Za-z0-9]{1,11})[_-](?P<body>[A-Za-z0-9_-]{16,300})"
        r"(?![A-Za-z0-9_-])",
        check=_prefixed_random,
    ),
    Rule(
        "credential named in prose",
        ("key", "token", "secret", "password", "passphrase", "credential"),
        r"(?i)\b(?:key|token|secret|password|passphrase|credential)s?\s+(?:is|was|are)\s+"
        r"[\"'`]?(?P<secret>[^\s\"'`]{12,300})",
        check=_named_in_prose,
    ),
    Rule(
        "random value near a credential word",
        _NEAR_ANCHORS,
        _CANDIDATE,
        check=_near_credential_word,
        anchors=_NEAR_ANCHORS,
        reach=80,
        starts=r"(?<![\w+/.~-])\w",
    ),
]

RULES: list[Rule] = _RULES_BEFORE_PROVIDERS + _PROVIDERS + _RULES_AFTER_PROVIDERS
# The rules that know a secret by its own shape, not by the words around it: the only
# ones trusted where a line break is read as a join (`scrub.findings`).
FORMAT_RULES: list[Rule] = [
    rule
    for rule in RULES
    if rule in _PROVIDERS or rule.name in ("url credentials", "prefixed random token")
]
# Each keyword is looked for once per text, compared lower-cased unless it has capitals;
# a rule runs when one of its keywords is there (rules without keywords always run).
_BY_KEYWORD: dict[str, list[int]] = {}
for _index, _rule in enumerate(RULES):
    for _word in _rule.keywords:
        _BY_KEYWORD.setdefault(_word, []).append(_index)
_ALWAYS = [index for index, rule in enumerate(RULES) if not rule.keywords]
_LOWER_KEYWORDS = [word for word in _BY_KEYWORD if word.islower()]
_CASED_KEYWORDS = [word for word in _BY_KEYWORD if not word.islower()]


def rule_findings(text: str, rules: Sequence[Rule] | None = None) -> list[tuple[int, int, str]]:
    """(start, end, rule name) of what RULES (all by default) find in TEXT."""
    lowered = text.lower()
    active = set(_ALWAYS)
    for word in _LOWER_KEYWORDS:
        if word in lowered:
            active.update(_BY_KEYWORD[word])
    for word in _CASED_KEYWORDS:
        if word in text:
            active.update(_BY_KEYWORD[word])
    found: list[tuple[int, int, str]] = []
    for index in sorted(active):
        rule = RULES[index]
        if rules is not None and rule not in rules:
            continue
        spans = rule.spans(text)
        if rule.yields:
            earlier = found[:]
            spans = (
                span
                for span in spans
                if not any(start < span[1] and span[0] < end for start, end, _ in earlier)
            )
        found.extend((start, end, rule.name) for start, end in spans)
    return found
