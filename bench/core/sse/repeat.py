"""A content chunk that repeats the stream's previous one but for its text, read without a JSON parse.

A server streams every token as the same JSON with only the content's text changed (the id,
`created`, the model's name and the empty fields are the same for a request's every chunk). Once
a stream's content chunk has been parsed in full, its bytes are kept as a prefix (up to the
content string's opening quote) and a suffix (from its closing quote on); a later read that
starts with that prefix, ends with that suffix, and has between them a non-empty text with no quote, no
backslash and no control character, in valid UTF-8, is that same JSON with a different content
string, so it says what the parsed chunk said with this text as its output: output and answer,
no finish_reason, no usage, no error, the same model. Exact by construction, it is learned only
from a chunk that makes the substitution safe (`learn`), and anything else takes the full parse.
"""

from __future__ import annotations

import re

# What would end, escape or break the JSON string (or, as \r and \n, the SSE line) it sits in.
_UNSAFE = re.compile(rb'["\\\x00-\x1f]')
_KEY = b'"content"'
# the key, its colon and the string's opening quote, with the blanks JSON allows (Python's json.dumps
# writes `"content": "`, most servers `"content":"`)
_OPEN = re.compile(rb'"content"[ \t]*:[ \t]*"')


class RepeatedChunk:
    """One stream's last content chunk, as the bytes around its text."""

    __slots__ = ("prefix", "suffix", "start", "end")

    def __init__(self, prefix: bytes, suffix: bytes) -> None:
        self.prefix = prefix
        self.suffix = suffix
        self.start = len(prefix)
        self.end = len(suffix)

    @staticmethod
    def learn(read: bytes, text: str) -> RepeatedChunk | None:
        """The shortcut for reads like `read`, one whole `data: ` event whose payload parsed as an
        output, answer-bearing chunk with output text `text`, no finish_reason, no usage and no
        error; None when `read` does not make the substitution exact: a backslash anywhere (a key
        spelt with escapes could be `content`), `"content"` more than once (a second such key
        would win over the first), or a text that is not exactly the `content` string's bytes
        (other output beside it: reasoning, a second choice)."""
        if b"\\" in read or read.count(_KEY) != 1:
            return None
        opened = _OPEN.search(read)
        if opened is None:
            return None
        start = opened.end()
        close = read.find(b'"', start)
        found = read[start:close]
        if close < 0 or not found or _UNSAFE.search(found):
            return None
        try:
            if found.decode() != text:
                return None
        except UnicodeDecodeError:
            return None
        return RepeatedChunk(read[:start], read[close:])

    def text_of(self, read: bytes) -> str | None:
        """The content text of `read` when it is this chunk with another text; None otherwise."""
        if not (read.startswith(self.prefix) and read.endswith(self.suffix)):
            return None
        found = read[self.start:len(read) - self.end]
        if not found or _UNSAFE.search(found):
            return None
        try:
            return found.decode()
        except UnicodeDecodeError:
            return None
