"""Git's two variable-length integer encodings, 7 bits a byte, the high bit saying "more".

- `offset_varint`: big-endian, each continuation adding one before the shift (git's
  `decode_varint`), so no number has two spellings. Git writes it for the distance back
  to an OFS_DELTA's base in a pack and for the prefix an index v4 entry drops.
- `size_varint`: little-endian, no offset. Git writes it for the two sizes at the head
  of a delta (the base's and the result's).

Both read from DATA at AT and return (the number, where it ends); both raise IndexError
when DATA ends before the number does.
"""


def offset_varint(data: bytes, at: int) -> tuple[int, int]:
    """The big-endian, offset-encoded number at AT (git's `decode_varint`)."""
    byte = data[at]
    at += 1
    value = byte & 127
    while byte & 128:
        byte = data[at]
        at += 1
        value = ((value + 1) << 7) | (byte & 127)
    return value, at


def size_varint(data: bytes, at: int) -> tuple[int, int]:
    """The little-endian number at AT (a delta header's size)."""
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 127) << shift
        shift += 7
        if not byte & 128:
            return value, at
