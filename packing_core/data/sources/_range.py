"""A byte range of a stream, read as if it were the whole file: one scan task's share of a big file; and
:func:`read_at_most`, a stream read whole up to a limit.

    >>> import io
    >>> part = ByteRange(io.BytesIO(b"line 1\\nline 2\\nline 3\\n"), 7, 14)
    >>> part.read(), part.tell(), part.seek(0), part.read(4)
    (b'line 2\\n', 7, 0, b'line')
"""
from __future__ import annotations

import io


class ByteRange:
    """Bytes ``start`` to ``end`` of a binary stream, read (and told, and rewound) as a whole file."""

    def __init__(self, raw, start: int, end: int):
        self.raw, self.start, self.end = raw, start, end
        raw.seek(start)

    def read(self, n: int = -1) -> bytes:
        left = max(0, self.end - self.raw.tell())
        return self.raw.read(left if n is None or n < 0 else min(n, left))

    def tell(self) -> int:
        return self.raw.tell() - self.start

    def seek(self, offset: int, whence: int = 0) -> int:
        if whence != 0:
            raise ValueError("a range of lines is rewound from its start only")
        return self.raw.seek(self.start + offset) - self.start

    def close(self) -> None:
        self.raw.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_at_most(f, limit: int) -> bytes:
    """``f`` from where it stands, at most ``limit + 1`` bytes (one more says it went past ``limit``).

    ``f.read(n)`` sets aside ``n`` bytes before it reads one, so a limit raised far past the file (an
    operator's ``PACKING_LAB_MAX_BATCH_FILE_BYTES=1e12``) is read as the bytes the file has left, and a
    stream that cannot say its size is read in blocks: memory follows the file, never the limit.

    >>> read_at_most(io.BytesIO(b"abcdef"), 2**40), read_at_most(io.BytesIO(b"abcdef"), 3)
    (b'abcdef', b'abcd')
    """
    want = limit + 1
    try:
        here = f.tell()
        end = f.seek(0, io.SEEK_END)
        f.seek(here)
    except (AttributeError, OSError, ValueError):   # a stream without an end to seek to: read in blocks
        parts: list[bytes] = []
        while want > 0 and (block := f.read(min(want, 64 << 20))):
            parts.append(block)
            want -= len(block)
        return b"".join(parts)
    return f.read(min(want, max(end - here, 0) + 1))
