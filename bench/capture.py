"""One agent-hook run on a long Claude Code transcript: the new tail against the whole file.

Writes a Claude Code 2.1-shaped transcript of about 60 MB (assistant text, thinking and
tool-use lines sharing message ids, tool results with large outputs) into a temporary
repository's turn store, captures it once, then, side by side in one run, for each round:

- tail: a new response of 81 lines is appended and `ingest_claude_code` runs with the
  cursor in place (what every hook run does): it reads only those lines;
- whole: the cursor is dropped first, so the same call reads and parses the whole file
  again (recovery; what every run did before the cursor), taking nothing twice.

Times are CPU time of this process (the machine may be shared; wall time is printed
too). Also times the whole hook command (`git obversa agent-hook claude-code` with a Stop event
on stdin) for the tail case, Python start-up included. Prints medians and the ratio.

Then, with the commit hooks installed (so every capture composes ahead of the commit)
and PENDING megabytes of turns waiting (issue 25), side by side in one run: the hook
command on a new tail, the same with the cursor dropped (a whole read), and the same
tail with nothing pending. A capture pays for what is new: the first ratio is the
acceptance's (tail / whole read), the last says what a long session without a commit
costs per capture against its first (≤ 2x).

Last, a session without a commit (`--captures N`, default 1,000): N hook commands, each
on a new response of a fresh transcript, with the hooks installed, nothing committed, so
everything captured stays pending. One capture is the median of the first 10; the
acceptance (issue 25) asks that every capture of the session costs at most 2x that: the
mean, and the median of the last 10, against it. Wall time, and the CPU time of the hook
processes (steadier on a shared machine).

The package is compiled first, as an installed package is (pip compiles it): with
PYTHONDONTWRITEBYTECODE set, every hook process would compile its modules from source.

    python bench/capture.py [--megabytes 60] [--runs 15] [--pending 1] [--captures 1000]
                            [--before REV]

With --agent-hooks, instead: each agent's hook command as its client runs it, on the
transcripts and events the real clients wrote (fixtures/realclients): every event kind of
each agent (before and after a git command, the end of a response), the median wall time
of N runs at idle (the cursor is in place, as between two events of a session), beside a
bare `python -c pass` timed in the same rounds. Each run finds what the client had
written when it ran the hook: Claude Code's tool call in the transcript (the fixture's);
for Copilot CLI, the record of the hook run's own start, appended to the events file
before each run as the client writes it. Two more lines show the bounded wait when that
entry is really late (never written): the hook gives up after `FLUSH_WAIT`.

    python bench/capture.py --agent-hooks [--runs 20]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import before  # noqa: E402  (bench/before.py, beside this script)

sys.path.insert(0, str(before.tree()))

from git_obversa.agents.claude_code import SOURCE, ingest_claude_code  # noqa: E402
from git_obversa.record.turns import TurnStore  # noqa: E402

WORDS = (
    "the retry budget caps how many requests we send again while the gateway is failing "
    "so a burst of errors cannot turn into a storm of retries against the same upstream "
).split()
TAIL_LINES = 81


class Session:
    """Lines of a synthetic session, numbered so every run writes new ids; sessions of
    different NAMEs share none (the adapter takes a message it has seen once only)."""

    def __init__(self, name: str = "bench") -> None:
        self.number = 0
        self.name = name
        self.family = sum(name.encode()) % 10_000

    def _base(self, kind: str, **extra) -> dict:
        self.number += 1
        return {
            "parentUuid": f"00000000-0000-4000-{self.family:04d}-{self.number - 1:012d}",
            "isSidechain": False,
            "userType": "external",
            "cwd": "/home/dev/src/app",
            "sessionId": self.name,
            "version": "2.1.332",
            "gitBranch": "main",
            "type": kind,
            "uuid": f"00000000-0000-4000-{self.family:04d}-{self.number:012d}",
            "timestamp": f"2026-11-30T10:00:00.{self.number:09d}Z",
            **extra,
        }

    def _text(self, words: int) -> str:
        start = self.number % len(WORDS)
        return " ".join((WORDS[start:] + WORDS) * (words // len(WORDS) + 1))[: words * 6]

    def response(self, lines: int, output_bytes: int) -> list[str]:
        """One response: a prompt, then messages of thinking + text + tool use, each
        followed by a tool result of OUTPUT_BYTES."""
        written = [self._base("user", message={"role": "user", "content": self._text(30)})]
        while len(written) < lines:
            message_id = f"msg_01{self.family:04d}{self.number:018d}"
            blocks = [
                {"type": "thinking", "thinking": "", "signature": "Eu" + "x" * 300},
                {"type": "text", "text": self._text(60)},
                {"type": "tool_use", "id": f"toolu_{self.number}", "name": "Bash", "input": {}},
            ]
            for block in blocks:
                message = {"id": message_id, "model": "claude-opus-4-5", "content": [block]}
                written.append(self._base("assistant", message=message))
            result = {"type": "tool_result", "tool_use_id": f"toolu_{self.number}"}
            result["content"] = ("output line\n" * (output_bytes // 12 + 1))[:output_bytes]
            written.append(
                self._base(
                    "user",
                    message={"role": "user", "content": [result]},
                    toolUseResult={"stdout": result["content"]},
                )
            )
        return [json.dumps(entry) + "\n" for entry in written[:lines]]


def median_ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


def timed(call):
    """(CPU seconds, wall seconds, result) of CALL()."""
    cpu, wall = time.process_time(), time.perf_counter()
    result = call()
    return time.process_time() - cpu, time.perf_counter() - wall, result


FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "realclients"
FIXTURE_HOME, FIXTURE_REPO = "/home/user", "/home/user/src/app"


def _fixture_events(agent: str, home: Path, repo: Path) -> list[tuple[str, str]]:
    """(event name, stdin) of each distinct event kind the agent's hook handles, paths
    moved into HOME and REPO; the agent's fixture files copied into HOME (Claude Code's
    project directory named after REPO, as the events name it)."""
    source = FIXTURES / agent
    mangled = str(repo).replace("/", "-").replace(".", "-").replace("_", "-")
    for path in source.rglob("*.jsonl"):
        if path.name == "hook-events.jsonl":
            continue
        target = home / str(path.relative_to(source)).replace("-home-user-src-app", mangled)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(path.read_text().replace(FIXTURE_HOME, str(home)))
    found: dict[str, str] = {}
    for line in (source / "hook-events.jsonl").read_text().splitlines():
        event = json.loads(
            line.replace("-home-user-src-app", mangled)
            .replace(FIXTURE_REPO, str(repo))
            .replace(FIXTURE_HOME, str(home))
        )
        name = event.get("hook_event_name") or (
            "preToolUse"
            if "toolArgs" in event and "toolResult" not in event
            else "postToolUse"
            if "toolResult" in event
            else "agentStop"
            if "transcriptPath" in event
            else None
        )
        command = json.dumps(event.get("tool_input") or event.get("toolArgs") or {})
        wanted = {
            "PreToolUse",
            "PostToolUse",
            "BeforeTool",
            "AfterTool",
            "Stop",
            "AfterAgent",
            "SubagentStop",
            "preToolUse",
            "postToolUse",
            "agentStop",
        }
        if name in wanted and ("Tool" not in name or "git" in command):
            found.setdefault(name, json.dumps(event))
    return list(found.items())


def _copilot_start(home: Path, name: str, stdin: str) -> tuple[Path, bytes] | None:
    """Copilot CLI: (its events file, the record of the start of the hook run STDIN is
    the payload of), which the client writes before it runs the hook."""
    from git_obversa.agents.copilot import event_fields, own_hook_start

    fields = event_fields(json.loads(stdin), name)
    found = own_hook_start(fields)
    events = home / ".copilot" / "session-state" / fields["session_id"] / "events.jsonl"
    lines = events.read_bytes().splitlines(keepends=True) if events.exists() else []
    own = [line for line in lines if found and found(line)]
    return (events, own[0]) if own else None


def _late(agent: str, name: str, stdin: str) -> str | None:
    """STDIN changed so that what the hook waits for is never written, or None when the
    event waits for nothing."""
    event = json.loads(stdin)
    if agent == "claude-code" and name == "PreToolUse":
        return json.dumps({**event, "tool_use_id": "toolu_never_written"})
    if agent == "copilot" and name in ("preToolUse", "agentStop"):
        return json.dumps({**event, "timestamp": 0, "toolArgs": {"command": "git never"}})
    return None


def _hook_ms(command: list[str], repo: Path, stdin: str, env: dict, before=None) -> float:
    if before:
        before()
    begin = time.perf_counter()
    subprocess.run(command, cwd=repo, input=stdin, text=True, capture_output=True, env=env)
    return time.perf_counter() - begin


def agent_hooks(runs: int) -> None:
    """The --agent-hooks mode (module docstring)."""
    import os

    bare, table, late = [], [], []
    with tempfile.TemporaryDirectory() as temporary:
        for agent in ("claude-code", "codex", "gemini", "copilot", "qwen"):
            if not (FIXTURES / agent / "hook-events.jsonl").exists():
                continue
            home, repo = Path(temporary) / agent / "home", Path(temporary) / agent / "repo"
            home.mkdir(parents=True)
            env = {**os.environ, "COPILOT_HOME": str(home / ".copilot")}
            subprocess.run(["git", "init", "-q", str(repo)], check=True)
            subprocess.run(["git", "obversa", "install"], cwd=repo, capture_output=True)
            for name, stdin in _fixture_events(agent, home, repo):
                command = ["git", "obversa", "agent-hook", agent]
                if agent == "copilot":
                    command.append(name)
                written = _copilot_start(home, name, stdin) if agent == "copilot" else None

                def write_start(written=written) -> None:
                    if written:  # the client records the hook's start, then runs it
                        with open(written[0], "ab") as events:
                            events.write(written[1])

                times = []
                for _ in range(runs):
                    begin = time.perf_counter()
                    subprocess.run([sys.executable, "-c", "pass"])
                    bare.append(time.perf_counter() - begin)
                    times.append(_hook_ms(command, repo, stdin, env, write_start))
                table.append((agent, name, median_ms(times)))
                never = _late(agent, name, stdin)
                if never:
                    waits = [_hook_ms(command, repo, never, env) for _ in range(3)]
                    late.append((agent, name, median_ms(waits)))
    floor = median_ms(bare)
    print(f"python -c pass: {floor:.1f} ms wall (median of {len(bare)})")
    print(f"{'agent':14}{'event':14}{'median ms':>10}{'/ bare':>8}")
    for agent, name, median in table:
        print(f"{agent:14}{name:14}{median:10.1f}{median / floor:7.1f}x")
    from git_obversa.agents.hook_events import FLUSH_WAIT

    print(f"entry never written (the wait's bound, {FLUSH_WAIT * 1000:.0f} ms; median of 3):")
    for agent, name, median in late:
        print(f"{agent:14}{name:14}{median:10.1f}{median / floor:7.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--megabytes", type=int, default=60)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--pending", type=float, default=1.0, help="megabytes pending")
    parser.add_argument("--captures", type=int, default=1000, help="captures in one session")
    parser.add_argument("--agent-hooks", action="store_true", help="time each agent's hook")
    before.add_arguments(parser)
    args = parser.parse_args()
    if args.agent_hooks:
        return agent_hooks(args.runs)
    if before.side_by_side(args):
        return
    before.compile_package(before.tree())

    with tempfile.TemporaryDirectory() as temporary:
        root = Path(temporary)
        repo = root / "repo"
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        store = TurnStore.for_worktree(repo)
        transcript = root / "session.jsonl"
        session = Session()
        started = time.perf_counter()
        with open(transcript, "w") as handle:
            while handle.tell() < args.megabytes * 1024 * 1024:
                handle.writelines(session.response(TAIL_LINES, output_bytes=20_000))
        size = transcript.stat().st_size
        first = time.perf_counter()
        ingest_claude_code(transcript, store, "commit")
        captured = time.perf_counter() - first
        print(
            f"transcript: {size / 1e6:.1f} MB, {session.number} lines "
            f"(written in {first - started:.1f} s; first capture {captured:.2f} s)"
        )
        cursors = store.directory / "agents" / SOURCE / "cursors"
        tail_cpu, tail_wall, whole_cpu, whole_wall, hook_wall, taken = [], [], [], [], [], []
        for _ in range(args.runs):
            with open(transcript, "a") as handle:
                handle.writelines(session.response(TAIL_LINES, output_bytes=2_000))
            cpu, wall, result = timed(lambda: ingest_claude_code(transcript, store, "commit"))
            tail_cpu.append(cpu)
            tail_wall.append(wall)
            taken.append(len(result.turns))

            shutil.rmtree(cursors)
            cpu, wall, result = timed(lambda: ingest_claude_code(transcript, store, "commit"))
            whole_cpu.append(cpu)
            whole_wall.append(wall)
            assert result.turns == [], "the whole read took something twice"

            with open(transcript, "a") as handle:
                handle.writelines(session.response(TAIL_LINES, output_bytes=2_000))
            event = {
                "hook_event_name": "Stop",
                "transcript_path": str(transcript),
                "cwd": str(repo),
            }
            command = ["git", "obversa", "agent-hook", "claude-code"]
            begin = time.perf_counter()
            subprocess.run(command, input=json.dumps(event), text=True, capture_output=True)
            hook_wall.append(time.perf_counter() - begin)
        tail, whole = median_ms(tail_cpu), median_ms(whole_cpu)
        print(f"new tail: {TAIL_LINES} lines, {statistics.median(taken):.0f} turns taken per run")
        print(f"{'median ms':>42}{'CPU':>8}{'wall':>8}")
        print(f"{'tail read (cursor)':42}{tail:8.2f}{median_ms(tail_wall):8.1f}")
        print(f"{'whole read (no cursor)':42}{whole:8.1f}{median_ms(whole_wall):8.1f}")
        print(f"{'ratio whole / tail':42}{whole / tail:7.0f}x")
        print(f"{'hook command on a tail (process, wall)':42}{'':8}{median_ms(hook_wall):8.1f}")
        before.figure("tail read, CPU", tail)
        before.figure("whole read, CPU", whole)
        before.figure("hook command on a tail, wall", median_ms(hook_wall))
        pending_runs(repo, store, transcript, session, args)
        session_run(repo, store, root / "short.jsonl", args.captures)


def hook_times(repo: Path, transcript: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of one `git obversa agent-hook claude-code` Stop event, the CPU
    time of every process it ran (git included)."""
    event = {"hook_event_name": "Stop", "transcript_path": str(transcript), "cwd": str(repo)}
    command = ["git", "obversa", "agent-hook", "claude-code"]
    before_run = resource.getrusage(resource.RUSAGE_CHILDREN)
    begin = time.perf_counter()
    completed = subprocess.run(command, input=json.dumps(event), text=True, capture_output=True)
    wall = time.perf_counter() - begin
    after_run = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert completed.returncode == 0, completed.stderr
    assert "warning" not in completed.stderr, completed.stderr
    cpu = after_run.ru_utime + after_run.ru_stime - before_run.ru_utime - before_run.ru_stime
    return wall, cpu


def fill_pending(store: TurnStore, megabytes: float) -> None:
    """Replace what is pending with MEGABYTES of reasoning turns."""
    store.discard()
    turns, size, number = [], 0, 0
    while size < megabytes * 1e6:
        number += 1
        text = f"Turn {number}: " + " ".join(WORDS[number % 7 :][:40]) + ", because of bursts."
        turns.append({"stage": "commit", "node": "commit", "kind": "engine:text", "text": text})
        size += len(text)
    store.append(turns)


def session_run(repo: Path, store: TurnStore, transcript: Path, captures: int) -> None:
    """CAPTURES hook commands in one session without a commit: what each costs."""
    store.discard()
    session = Session("session")
    walls, cpus = [], []
    for _ in range(captures):
        with open(transcript, "a") as handle:
            handle.writelines(session.response(TAIL_LINES, output_bytes=2_000))
        wall, cpu = hook_times(repo, transcript)
        walls.append(wall)
        cpus.append(cpu)
    pending = sum(len(turn["text"]) for turn in store.read())
    print(
        f"a session of {captures} captures, no commit ({pending / 1e6:.1f} MB pending at the end):"
    )
    print(f"{'ms':42}{'wall':>8}{'CPU':>8}")
    rows = (
        ("first capture", lambda values: values[0] * 1000),
        ("one capture (median of the first 10)", lambda values: median_ms(values[:10])),
        ("mean capture", lambda values: statistics.mean(values) * 1000),
        ("last 10 captures, median", lambda values: median_ms(values[-10:])),
    )
    for name, figure in rows:
        print(f"{name:42}{figure(walls):8.1f}{figure(cpus):8.1f}")
    for name, values in (("wall", walls), ("CPU", cpus)):
        one = median_ms(values[:10])
        mean = statistics.mean(values) * 1000 / one
        last = median_ms(values[-10:]) / one
        print(f"{'ratio mean / one capture, ' + name:42}{mean:8.2f}  (acceptance: <= 2)")
        print(f"{'ratio last 10 / one capture, ' + name:42}{last:8.2f}")
        before.figure(f"session of {captures}: mean / one capture, {name}", mean, "x")
        before.figure(f"session of {captures}: last 10 / one capture, {name}", last, "x")
    before.figure("session: one capture, CPU", median_ms(cpus[:10]))


def pending_runs(repo: Path, store: TurnStore, transcript: Path, session, args) -> None:
    subprocess.run(["git", "obversa", "install"], cwd=repo, check=True, capture_output=True)
    cursors = store.directory / "agents" / SOURCE / "cursors"
    runs: dict[str, list[tuple[float, float]]] = {"tail": [], "whole": [], "empty": []}
    for _ in range(args.runs):
        fill_pending(store, args.pending)
        # The captures before this one composed ahead: one untimed capture does it, with
        # the package the hook runs (an installed one's composition is its own).
        with open(transcript, "a") as handle:
            handle.writelines(session.response(TAIL_LINES, output_bytes=2_000))
        hook_times(repo, transcript)
        with open(transcript, "a") as handle:
            handle.writelines(session.response(TAIL_LINES, output_bytes=2_000))
        runs["tail"].append(hook_times(repo, transcript))
        shutil.rmtree(cursors)
        with open(transcript, "a") as handle:
            handle.writelines(session.response(TAIL_LINES, output_bytes=2_000))
        runs["whole"].append(hook_times(repo, transcript))
        store.discard()
        with open(transcript, "a") as handle:
            handle.writelines(session.response(TAIL_LINES, output_bytes=2_000))
        runs["empty"].append(hook_times(repo, transcript))
    wall = {name: median_ms([run[0] for run in values]) for name, values in runs.items()}
    cpu = {name: median_ms([run[1] for run in values]) for name, values in runs.items()}
    print(f"hooks installed, {args.pending:g} MB pending, composed ahead by every capture:")
    print(f"{'median ms':42}{'wall':>8}{'CPU':>8}")
    for name, what in (
        ("tail", "hook command on a tail"),
        ("whole", "hook command on a whole read (no cursor)"),
        ("empty", "hook command on a tail, nothing pending"),
    ):
        print(f"{what:42}{wall[name]:8.1f}{cpu[name]:8.1f}")
    for name, figures in (("wall", wall), ("CPU", cpu)):
        tail, whole, empty = figures["tail"], figures["whole"], figures["empty"]
        print(f"{'ratio tail / whole read, ' + name:42}{tail / whole:8.2f}  (acceptance: <= 0.3)")
        print(f"{'ratio tail / tail, nothing pending, ' + name:42}{tail / empty:8.2f}")
        before.figure(f"hook on a tail, {args.pending:g} MB pending, {name}", tail)
        before.figure(f"hook on a tail, nothing pending, {name}", empty)
        before.figure(f"hook on a whole read, {name}", whole)
        before.figure(
            f"ratio tail / whole read, {args.pending:g} MB pending, {name}", tail / whole, "x"
        )


if __name__ == "__main__":
    main()
