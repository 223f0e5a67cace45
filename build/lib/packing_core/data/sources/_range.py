"""A byte range of a stream, read as if it were the whole file: one scan task's share of a big file.

    >>> import io
    >>> part = ByteRange(io.BytesIO(b"line 1\\nline 2\\nline 3\\n"), 7, 14)
    >>> part.read(), part.tell(), part.seek(0), part.read(4)
    (b'line 2\\n', 7, 0, b'line')
"""
from __future__ import annotations


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
