"""What follows a capture of reasoning (`record note`, `record ingest`, an agent's hook):
compose it ahead of the commit that will carry it, or say that no commit will."""

from __future__ import annotations

from git_obversa.record.turns import TurnStore
from git_obversa.repo import git

DEFAULT_STAGE = "commit"


def configured_stage(cwd: str | None = None, config: dict[str, str] | None = None) -> str:
    """`git config obversa.stage` in CWD (in CONFIG when it was read: `read_config`), else
    the default stage."""
    if config is not None:
        return config.get("obversa.stage", "").strip() or DEFAULT_STAGE
    configured = git.run(["config", "--get", "obversa.stage"], cwd, check=False).stdout.strip()
    return configured or DEFAULT_STAGE


def hooks_missing_line(cwd: str | None = None) -> list[str]:
    """One line to say when no commit here would carry the captured reasoning."""
    from git_obversa.hooks.install import installed

    if installed(cwd):
        return []
    return [
        "note: this repository's commit hooks are not installed, so no commit will carry "
        "the captured reasoning; run `git obversa install`"
    ]


def after_capture(
    store: TurnStore, cwd: str | None = None, settings: bytes | None = None
) -> list[str]:
    """What a capture does once it added turns: when a commit here would carry them,
    compose them ahead of it (the commit then only copies the composition in: issue 14),
    else return the line that says so. SETTINGS: `composition.config_output(cwd)`, when
    the capture read it already."""
    lines = hooks_missing_line(cwd)
    if not lines:
        from git_obversa.record.composition import compose_ahead

        compose_ahead(store.directory, cwd, settings)
    return lines


def malformed_line(ingested: object) -> str:
    """The one warning for the malformed lines an ingest met for the first time."""
    numbers = ingested.malformed
    which = (
        f"line {numbers[0]} is"
        if len(numbers) == 1
        else (
            "lines "
            + ", ".join(str(number) for number in numbers[:10])
            + (", …" if len(numbers) > 10 else "")
            + " are"
        )
    )
    return f"warning: {ingested.transcript}: {which} not JSON; skipped"
