"""lean/checksum.py catches what the `zlib.crc32` it stands in for catches."""

import random
import zlib

from git_obversa.lean.checksum import PRIME, checksum


def test_prime_is_a_prime_just_below_2_to_the_30():
    assert 2**29 < PRIME < 2**30
    assert all(PRIME % divisor for divisor in range(2, int(PRIME**0.5) + 1))


def test_every_change_of_one_byte_shows_as_it_does_with_a_crc32():
    rng = random.Random(22)
    data = bytearray(rng.randbytes(3000))
    original, crc = checksum(bytes(data)), zlib.crc32(data)
    for at in range(len(data)):
        kept = data[at]
        data[at] = (kept + rng.randrange(1, 256)) % 256
        assert checksum(bytes(data)) != original and zlib.crc32(data) != crc, at
        data[at] = kept


def test_every_burst_of_up_to_29_bits_shows():
    rng = random.Random(30)
    data = rng.randbytes(400)
    number = int.from_bytes(data, "little")
    for _ in range(20_000):
        width = rng.randrange(1, 30)
        at = rng.randrange(0, len(data) * 8 - width)
        flipped = (number ^ (rng.randrange(1, 1 << width) << at)).to_bytes(len(data), "little")
        assert checksum(flipped) != checksum(data)
        assert zlib.crc32(flipped) != zlib.crc32(data)


def test_its_values_are_fixed():
    # Blame cache entries on disk carry these values: changing the scheme changes that
    # format (cache.FORMAT) too.
    assert checksum(b"") == 0
    assert checksum(b"\x01\x00") == 1
    assert f"{checksum(b'notes.md'):08x}" == "1129f489"
    assert f"{checksum(bytes(range(256)) * 40):08x}" == "38f011ff"
