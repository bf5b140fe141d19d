"""Each start-up stand-in of git_obversa/lean/ behaves as the standard module it replaces."""

import copy
import dataclasses
import pickle

import pytest

from git_obversa.memory.port import MemoryLimits


@pytest.mark.parametrize(
    "text",
    [
        '{"format": 1, "entries": [{"path": "/memories/a.md", "byteLength": 3}]}',
        ' \n\t["\\u00e9", 1.5, -2, 1e400, true, null, {}]\r\n',
        '{"max_files": 512}',
        '"\\ud800"',
        *("", " ", "{not json", '{"a": 1} x', "[1,]", "\ufeff{}", "NaN", "[-Infinity]"),
        *('"\x01"', "[" * 100000, "01", '{"a" 1}'),
    ],
)
def test_json_reads_as_the_json_package_reads_it(text):
    import json

    from git_obversa.lean import jsonscan

    for constants in (True, False):
        hook = {} if constants else {"parse_constant": jsonscan._reject_constant}
        try:
            expected = ("value", json.loads(text, **hook))
        except (ValueError, RecursionError) as error:
            expected = (type(error), str(error))
        try:
            found = ("value", jsonscan.loads(text, constants=constants))
        except (ValueError, RecursionError) as error:
            found = (type(error), str(error))
        assert repr(found) == repr(expected)  # repr: nan is not equal to itself


def test_json_strings_are_quoted_as_json_dumps_quotes_them():
    import json

    from git_obversa.lean import jsonscan

    for text in ("/memories/a.md", 'quote " back \\ slash', "é\u2028\x00\ud800", ""):
        assert jsonscan.quote(text) == json.dumps(text)
        assert jsonscan.quote(text, ascii=False) == json.dumps(text, ensure_ascii=False)


def test_an_object_id_is_the_same_from_cpythons_digests_as_from_openssls():
    import hashlib

    from git_obversa.lean.builtin import builtin_sha1, builtin_sha256

    sha1, sha256 = builtin_sha1(), builtin_sha256()
    for data in (b"", b"blob 3\0abc", bytes(range(256)) * 300):
        assert sha1(data).hexdigest() == hashlib.sha1(data).hexdigest()
        assert sha256(data).hexdigest() == hashlib.sha256(data).hexdigest()


def test_json_is_written_as_json_dumps_writes_it():
    # What `--json` prints (cli.print_json) comes from jsonscan.dumps, without the json
    # package; for anything else json.dumps writes it (or refuses it) itself.
    import json
    import random

    from git_obversa.lean import jsonscan

    rng = random.Random(5)
    leaves = ["", 'é\u2028\x00"\\', "line\nbreak", 0, -7, 10**30, 1.5, -0.0, 1e300]
    leaves += [True, False, None]

    def value(depth: int = 0):
        roll = rng.random()
        if depth > 4 or roll < 0.4:
            return rng.choice(leaves)
        if roll < 0.7:
            return [value(depth + 1) for _ in range(rng.randint(0, 4))]
        return {rng.choice(["a", "ké", "", "x y"]) + str(n): value(depth + 1) for n in range(3)}

    values = [value() for _ in range(3000)]
    values += [float("nan"), {1: 2}, {"a": (1, [2])}, [float("inf")], {"k": {1.5: None}}]
    for item in values:
        assert jsonscan.dumps(item) == json.dumps(item, ensure_ascii=False, indent=2)


def test_memory_limits_work_with_dataclasses_as_the_dataclass_they_were():
    limits = MemoryLimits(max_files=7)
    assert dataclasses.is_dataclass(limits)
    assert [f.name for f in dataclasses.fields(limits)] == [
        "max_file_bytes",
        "max_total_bytes",
        "max_files",
    ]
    assert dataclasses.asdict(limits) == {
        "max_file_bytes": 65536,
        "max_total_bytes": 1048576,
        "max_files": 7,
    }
    changed = dataclasses.replace(limits, max_total_bytes=2048)
    assert changed == MemoryLimits(max_total_bytes=2048, max_files=7)
    assert type(changed) is MemoryLimits
    with pytest.raises(TypeError, match="max_files must be a positive safe integer"):
        dataclasses.replace(limits, max_files=0)
    with pytest.raises(TypeError):
        dataclasses.replace(limits, max_pages=1)
    assert (
        repr(limits) == "MemoryLimits(max_file_bytes=65536, max_total_bytes=1048576, max_files=7)"
    )
    assert copy.deepcopy(limits) == limits
    assert pickle.loads(pickle.dumps(limits)) == limits
    with pytest.raises(AttributeError):
        limits.max_files = 3  # frozen, as the dataclass was


def test_the_builtin_halves_are_the_standard_modules_own_objects():
    import collections.abc
    import operator
    import threading

    from git_obversa.lean import builtin

    assert builtin.Mapping is collections.abc.Mapping
    assert builtin.itemgetter is operator.itemgetter
    assert builtin.is_not is operator.is_not
    assert builtin.ne is operator.ne
    assert type(builtin.allocate_lock()) is type(threading.Lock())
