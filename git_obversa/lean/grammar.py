"""A command's arguments, declared once and read two ways: stands in for argparse's reading.

What it replaces: `argparse` reading the common shapes of a one-shot command's line.
Such a command declares its arguments once, as a `Grammar` of `Argument`s (argparse's own
keywords). `Grammar.add_to(parser)` turns the declaration into argparse arguments, so help,
usage and every error stay argparse's, and `Grammar.read(words)` reads the common shapes
of a command line without argparse.

Why: an agent calls `git obversa memory view`, `why` and the like once per command, so
their start counts, and argparse imports `re`, `enum`, `gettext` and `locale` with it.

`read` gives up (returns None, and argparse parses the line) on anything it does not
fully understand: a word starting with "-" that is not one of the declared spellings
(`-h`, an abbreviation, `-CC`, `--`, `-n5`), an option whose value starts with "-", an
option with an optional value or choices, a value the type function or check refuses,
too few or too many positionals, and positionals interleaved with options (argparse
versions disagree on those). Whatever it accepts, it reads as argparse does:
tests/test_lean_grammar.py holds the two equal over thousands of command lines.
"""

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence
    from typing import Any

# The actions `read` performs itself; any other makes it give up on a line that uses it.
_VALUELESS = ("store_true", "store_false", "store_const", "count")


class Argument:
    """One `parser.add_argument(*FLAGS, **OPTIONS)`. CHECK (values -> message or None)
    judges the values once converted; argparse reports a message as its own error."""

    __slots__ = ("flags", "options", "check", "dest")

    def __init__(
        self, *flags: str, check: "Callable[[Any], str | None] | None" = None, **options: "Any"
    ) -> None:
        self.flags, self.options, self.check = flags, options, check
        self.dest = options.get("dest") or _dest(flags)

    @property
    def positional(self) -> bool:
        return not self.flags[0].startswith("-")

    def add_to(self, parser: "argparse.ArgumentParser") -> None:
        options = self.options
        if self.check is not None:
            options = {**options, "action": _checked_action(self.check)}
        parser.add_argument(*self.flags, **options)

    def default(self) -> "Any":
        """The value argparse gives this argument when the command line does not."""
        action = self.options.get("action")
        if action in ("store_true", "store_false"):
            default = self.options.get("default", action == "store_false")
        else:
            default = self.options.get("default")
        if self.options.get("nargs") == "*" and self.positional and default is None:
            return []
        if isinstance(default, str):
            return self.convert(default)  # argparse converts a string default, too
        return default

    def convert(self, word: str) -> "Any":
        """WORD through the type function; ValueError (and whatever else the type raises)
        propagates, so `read` gives up and argparse says what was wrong."""
        kind = self.options.get("type")
        value = word if kind is None else kind(word)
        choices = self.options.get("choices")
        if choices is not None and value not in choices:
            raise ValueError(value)
        return value


class Grammar:
    """A (sub)command: its ARGUMENTS in the order `--help` lists them, and DEFAULTS set
    with them (`run`, `paged`, ...: argparse's `set_defaults`)."""

    __slots__ = ("arguments", "defaults")

    def __init__(self, arguments: "Sequence[Argument]", **defaults: "Any") -> None:
        self.arguments, self.defaults = tuple(arguments), defaults

    def add_to(self, parser: "argparse.ArgumentParser") -> None:
        for argument in self.arguments:
            argument.add_to(parser)
        parser.set_defaults(**self.defaults)

    def read(self, words: "Sequence[str]") -> "dict[str, Any] | None":
        """dest -> value for WORDS, as argparse's namespace would hold them, or None."""
        try:
            return self._read(words)
        except Exception:  # a type function's refusal: argparse words it
            return None

    def _read(self, words: "Sequence[str]") -> "dict[str, Any] | None":
        options = {flag: a for a in self.arguments if not a.positional for flag in a.flags}
        values: dict[str, Any] = {}
        for argument in self.arguments:  # arguments sharing a dest: the first one's default
            values.setdefault(argument.dest, argument.default())
        given: list[str] = []
        stage = "before"  # the positionals: before them, among them, after them
        index = 0
        while index < len(words):
            word = words[index]
            index += 1
            if _plain(word):
                if stage == "after":
                    return None
                stage = "among"
                given.append(word)
                continue
            attached = None
            if word.startswith("--") and "=" in word:
                word, _, attached = word.partition("=")
            argument = options.get(word)
            if argument is None:
                return None
            if stage == "among":
                stage = "after"
            taken = _take_option(argument, attached, words, index, values)
            if taken is None:
                return None
            index += taken
        if not self._place(given, values):
            return None
        return {**values, **self.defaults}

    def _place(self, given: list[str], values: "dict[str, Any]") -> bool:
        """Hand the positional words to the positionals left to right, as argparse's
        pattern does for these shapes; False when they do not fit."""
        positionals = [argument for argument in self.arguments if argument.positional]
        spare = len(given) - sum(1 for p in positionals if p.options.get("nargs") is None)
        if spare < 0:
            return False
        words = iter(given)
        for argument in positionals:
            nargs = argument.options.get("nargs")
            if nargs is None:
                values[argument.dest] = argument.convert(next(words))
            elif nargs == "?":
                if spare:
                    values[argument.dest] = argument.convert(next(words))
                    spare -= 1
            elif nargs == "*":
                if spare:
                    values[argument.dest] = [argument.convert(next(words)) for _ in range(spare)]
                    spare = 0
            else:
                return False
        return spare == 0


def _take_option(
    argument: Argument,
    attached: "str | None",
    words: "Sequence[str]",
    index: int,
    values: "dict[str, Any]",
) -> "int | None":
    """Apply ARGUMENT, an option met before WORDS[INDEX] (with ATTACHED, its `--x=value`
    value, if any), to VALUES; how many of the following words it took as its values, or
    None where `read` gives up."""
    action = argument.options.get("action", "store")
    if action in _VALUELESS:
        if attached is not None:
            return None
        values[argument.dest] = _valueless(argument, action, values[argument.dest])
        return 0
    nargs = argument.options.get("nargs")
    if action != "store" or not (nargs is None or isinstance(nargs, int)):
        return None
    if attached is not None:
        if nargs is not None:
            return None
        strings = [attached]
    else:
        strings = list(words[index : index + (nargs or 1)])
        if len(strings) < (nargs or 1) or not all(map(_plain, strings)):
            return None
    converted = [argument.convert(string) for string in strings]
    value = converted[0] if nargs is None else converted
    if argument.check is not None and argument.check(value) is not None:
        return None
    values[argument.dest] = value
    return 0 if attached is not None else len(strings)


def _valueless(argument: Argument, action: str, held: "Any") -> "Any":
    """The value ACTION, an action taking no value, leaves where HELD was."""
    if action == "count":
        return (held or 0) + 1
    if action == "store_const":
        return argument.options.get("const")
    return action == "store_true"


def _plain(word: str) -> bool:
    """Whether argparse takes WORD as a value, never as an option: it does not start
    with "-", or is "-" itself, a negative whole number (no declared option looks like
    one) or a Markdown bullet ("- item": no option starts with "- ")."""
    return not word.startswith("-") or word == "-" or word[1:].isdecimal() or word[1] == " "


def _dest(flags: "Sequence[str]") -> str:
    """argparse's name for an argument: a positional's own, else its first long option's
    (else first option's), without dashes, inner dashes as underscores."""
    if not flags[0].startswith("-"):
        return flags[0]
    chosen = next((flag for flag in flags if flag.startswith("--")), flags[0])
    return chosen.lstrip("-").replace("-", "_")


def _checked_action(check: "Callable[[Any], str | None]") -> "type[argparse.Action]":
    """An argparse action storing the values when CHECK finds nothing wrong with them."""
    import argparse

    class Checked(argparse.Action):
        def __call__(self, parser, namespace, values, option_string=None) -> None:
            message = check(values)
            if message is not None:
                raise argparse.ArgumentError(self, message)
            setattr(namespace, self.dest, values)

    return Checked
