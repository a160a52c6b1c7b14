"""A response body the server compressed though the request asked for `Accept-Encoding: identity`.

gzip and deflate are decoded as they arrive, through zlib's streaming decompressor: each read's
compressed bytes give what they decode to at once, so the caller stamps the decoded text with
the arrival time of the compressed bytes that carried it (a compressor that holds text back
delays its stamps; that is the server's stream as it arrived). Any other encoding (br, zstd, ...)
is refused with `UnsupportedEncoding`, whose message says so in one line.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

# The most decoded bytes one step yields: a small compressed read may decode to a great deal (a
# run of one byte compresses a thousandfold), so the decoded text is handed on in pieces, and the
# SSE decoder's cap on an event stops a stream before its decoded bytes are all held at once.
MAX_PIECE = 2**20
# what the encoding names map to: zlib's window bits (gzip: 16 + MAX_WBITS; deflate: zlib-wrapped)
_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


class UnsupportedEncoding(ValueError):
    """A Content-Encoding cellbench does not decode."""


class CorruptBody(ValueError):
    """The compressed bytes are not what their encoding says."""


def decoder_for(header: bytes | None) -> Inflater | None:
    """The decoder of a `Content-Encoding` header value; None for none or `identity`. Raises
    `UnsupportedEncoding` for any encoding but gzip and deflate (and for a chain of several)."""
    name = (header or b"").decode("latin-1").strip().lower()
    if name in ("", "identity"):
        return None
    if name not in _WBITS:
        raise UnsupportedEncoding(f"the server compressed the stream (Content-Encoding: {name}), "
                                  "which cellbench does not decode")
    return Inflater(name)


class Inflater:
    """Decodes one gzip or deflate body piece by piece: `feed(data)` yields the decoded pieces
    `data` completes, `finish()` those left at the end; `ended` once the compressed stream's own
    end arrived (a body cut before it is incomplete, whatever it decoded to so far)."""

    __slots__ = ("encoding", "_z", "_head")

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding  # the header's name: gzip, x-gzip or deflate
        # "deflate" is meant zlib-wrapped (RFC 9110), but some servers send raw deflate: its first
        # two bytes tell which, so its decompressor waits for them
        self._z = None if encoding == "deflate" else zlib.decompressobj(wbits=_WBITS[encoding])
        self._head = b""  # deflate's first bytes, while fewer than two came

    @property
    def ended(self) -> bool:
        return self._z is not None and self._z.eof

    def feed(self, data: bytes) -> Iterator[bytes]:
        if self._z is None:
            self._head += data
            if len(self._head) < 2:
                return
            data, self._head = self._head, b""
            self._z = zlib.decompressobj(wbits=zlib.MAX_WBITS if _zlib_wrapped(data) else -zlib.MAX_WBITS)
        z = self._z
        while data and not z.eof:
            try:
                piece = z.decompress(data, MAX_PIECE)
            except zlib.error as exc:
                raise CorruptBody(f"{self.encoding} body: {exc}") from None
            if piece:
                yield piece
            data = z.unconsumed_tail

    def finish(self) -> Iterator[bytes]:
        if self._z is None:
            return
        try:
            rest = self._z.flush()
        except zlib.error as exc:
            raise CorruptBody(f"{self.encoding} body: {exc}") from None
        if rest:
            yield rest


def _zlib_wrapped(head: bytes) -> bool:
    """A zlib header (RFC 1950): method 8 (deflate), and the two bytes a multiple of 31."""
    return head[0] & 0x0F == 8 and ((head[0] << 8) | head[1]) % 31 == 0
