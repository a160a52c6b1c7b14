"""Server-sent events over raw bytes, and what one OpenAI `chat.completion.chunk` says.

Three layers, each usable alone:

* `SSEDecoder`  - incremental event framing (WHATWG "event stream" rules): events split across
  reads or several per read, `\\n`, `\\r\\n` and bare `\\r` line ends, `data:` with or without the
  space, multi-line `data`, `event:` names, `error:` lines (llama-server's errors), comment lines (`: keepalive 10/11`,
  mlx-lm); an
  event still unfinished after `MAX_EVENT_BYTES` is an error, not a buffer that grows without end.
* `parse_chunk` - one event's payload as a `Chunk`: output-bearing or not, answer-bearing or not,
  `finish_reason`, usage, `model`, or an SSE error event.
* `ChatStream`  - applies timed reads to a `RequestRecord`: the stamps and the end-of-stream
  verdict (`t_first_token`, `t_first_answer`, chunk times, `t_end`, `truncated` /
  `empty_output` / `invalid_sse` / `stream_error_event`).

One module each (`decoder`, `chunk`, `stream`), and `repeat`: the per-event shortcut. The
per-event path is measured (tests/core/test_sse_benchmark.py); keep it to a few byte checks. A
read that is exactly one `data: ` event (the common case: a server flushes each token) skips the
decoder's line splitting (`ChatStream.feed`); when it is the stream's previous content chunk
with only the content's text changed, it is read without a JSON parse (`repeat.RepeatedChunk`,
exact by construction); otherwise the payload is read into a tuple, not a `Chunk`
(`chunk.read_payload`), by orjson when installed (`bench.base.fastjson`). Nothing here touches
the network or reads a clock: the caller passes the arrival time of each read, so every rule is
testable with a scripted clock.
"""

from bench.core.sse.chunk import Chunk, SSEFormatError, parse_chunk
from bench.core.sse.decoder import MAX_EVENT_BYTES, SSEDecoder, SSEEvent, SSEOverflow
from bench.core.sse.stream import DONE, HEAD_CHARS, ChatStream

__all__ = ["DONE", "HEAD_CHARS", "MAX_EVENT_BYTES", "ChatStream", "Chunk", "SSEDecoder", "SSEEvent", "SSEFormatError",
           "SSEOverflow", "parse_chunk"]


