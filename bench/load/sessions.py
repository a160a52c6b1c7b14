"""A session level: conversations whose turns go in order, each carrying the history so far with
the server's own answers (docs/metrics.md, Sessions).

`concurrency` slots each take the next conversation (`LevelConfig.sessions`) and run it to its
end; with a session rate (`Sessions.rate_per_s`) each conversation instead starts at its arrival
(a Poisson process seeded by `Sessions.seed`), waiting for a place while `concurrency` of them
are under way: its first turn's `t_sched` is the arrival and `t_admitted` the place, so the wait
is the queueing delay. Turn k's request holds the conversation's opening messages, then every
earlier user turn followed by the server's whole answer to it, then user turn k; a recorded agent
session (`Conversation.recorded`) sends each turn whole, as recorded. After each answer the
session waits the think time (fixed, drawn from an exponential of that mean and seeded per
session, or the one recorded) before the next turn. A turn that fails ends its session: a history
without its answer would not be the conversation any more. Each turn's record says its session,
its turn index, the answer's whole text and the SHA-256 of the messages it sent, so the request
log proves what each turn carried; with `Sessions.header` every turn also sends that header
naming its session (routers that keep a session's requests on one replica read one).

Everything else is the closed loop's: warm-up, the request machinery, deadlines, the watchdog,
progress (counted in turns).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Sequence

import numpy as np

from bench.core.level_run import LevelConfig
from bench.core.records import RequestRecord
from bench.core.sessions import Conversation, Sessions
from bench.load.arrivals import NAP_S, arrival_offsets
from bench.load.closed_loop import ClosedLoopLevel
from bench.load.interrupts import retrieve
from bench.setup.prompts import Prompt

_perf = time.perf_counter


class SessionLevel(ClosedLoopLevel):
    """A level of `cfg.sessions`' conversations, `cfg.concurrency` at a time."""

    def __init__(self, cfg: LevelConfig, prompts: Sequence[Prompt], warmup_prompts: Sequence[Prompt]) -> None:
        if cfg.sessions is None:
            raise ValueError("a session level needs LevelConfig.sessions")
        # the turns' bodies are made as the answers come
        super().__init__(cfg, prompts[:1] or [_NO_PROMPT], warmup_prompts)
        self.sessions: Sessions = cfg.sessions
        self.next_session = 0

    async def _measure(self) -> None:
        if self.sessions.rate_per_s is None:
            await asyncio.gather(*(self._slot(self.t0) for _ in range(self.cfg.concurrency)))
        else:
            await self._arrivals(self.sessions.rate_per_s)

    async def _slot(self, t_open: float) -> None:
        while self.next_session < len(self.sessions.conversations) and self._may_send():
            s = self.next_session
            self.next_session += 1
            await self._session(s, self.sessions.conversations[s])

    async def _arrivals(self, rate: float) -> None:
        """Each conversation starts at its arrival, once one of `concurrency` places is free."""
        places = asyncio.Semaphore(self.cfg.concurrency)
        started: list[asyncio.Task] = []

        async def admitted(s: int, arrival: float) -> None:
            async with places:
                await self._session(s, self.sessions.conversations[s], arrival)

        offsets = arrival_offsets(rate, 1.0, len(self.sessions.conversations), self.sessions.seed)
        try:
            for s, offset in enumerate(offsets):
                while self._may_send() and (wait := self.t0 + offset - _perf()) > 0:
                    await asyncio.sleep(min(wait, NAP_S))
                if not self._may_send():
                    break
                self.next_session = s + 1
                started.append(asyncio.ensure_future(admitted(s, self.t0 + offset)))
            await asyncio.gather(*started)
        finally:
            for task in started:
                if not task.done():  # interrupted: the sessions go down with their requests
                    task.cancel()
                    task.add_done_callback(retrieve)

    async def _session(self, s: int, conv: Conversation, arrival: float | None = None) -> None:
        history: list[dict] = list(conv.system)
        think = np.random.default_rng([self.sessions.seed, s])
        header = (f"{self.sessions.header}: {conv.name}-{s}\r\n".encode("latin-1")
                  if self.sessions.header else b"")
        for k, text in enumerate(conv.turns):
            if not self._may_send():
                return
            if conv.recorded:  # the recorded prompt holds its history already
                history = [*conv.system, {"role": "user", "content": text}]
            else:
                history.append({"role": "user", "content": text})
            body = {"model": self.cfg.model, "messages": history, "max_tokens": conv.budget(k), "stream": True,
                    **self.cfg.extra_body}
            sent = json.dumps(history, sort_keys=True).encode()
            i = self.next_index
            self.next_index += 1
            now = _perf()
            queued = arrival if k == 0 else None  # a session's arrival, waiting for its place
            record = RequestRecord(index=i, prompt_name=f"{conv.name}#{k}", warmup=False,
                                   t_sched=now if queued is None else queued,
                                   t_admitted=None if queued is None else now,
                                   max_tokens=conv.budget(k), session=s, turn=k, answer_text="",
                                   history_sha256=hashlib.sha256(sent).hexdigest())
            flight = await self._request(i, _NO_PROMPT, json.dumps(body).encode(), warmup=False,
                                         t_sched=now, record=record, headers=header)
            self.records.append(flight.record)
            self.failed += not flight.record.ok
            if not flight.record.ok:
                return
            if not conv.recorded:
                history.append({"role": "assistant", "content": flight.record.answer_text or ""})
            if k + 1 < len(conv.turns) and (pause := self.sessions.think(conv, k + 1, think.exponential)) > 0:
                await asyncio.sleep(pause)


_NO_PROMPT = Prompt("session turn", (), 0)  # `_request` takes the record made here, not the prompt's
