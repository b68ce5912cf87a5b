"""The two clocks of the decoder loop: a deterministic simulated clock and a real wall clock.

Both expose the same calls, so the decoder has one code path:

* ``decode()`` one decoded token; ``prefill(n)`` ``n`` prefill tokens;
* ``submit(fn)`` starts a retrieval (``fn`` is the index search) and returns a handle; ``ready(h)``,
  ``wait(h)`` (its result, blocking until it is ready) and ``cancel(h)``;
* ``now`` in milliseconds since ``start()``.

:class:`SimClock` (the headline metric): 25 ms per decoded token, 300 ms per retrieval, 1 ms per prefill token; a
retrieval submitted at ``t`` is ready at ``t + 300`` and overlaps decoding. :class:`WallClock`: the same loop in real
time; each decode step is padded with a sleep to ``decode_ms`` (the LLM being emulated), each retrieval runs in a
``ThreadPoolExecutor`` worker that sleeps ``retrieval_ms`` (a remote index) before the faiss search, prefill sleeps
``prefill_ms`` per token. ``scale`` shrinks every constant (and ``now`` is divided by it), so a wall-clock run at
``scale = 0.2`` takes a fifth of the time and reports milliseconds comparable with the simulated clock; our own
computation (LM forward, predictor, MiniLM queries) is *not* scaled, so the wall clock charges it at 1/scale.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass


@dataclass(frozen=True)
class ClockConstants:
    """Costs of the latency model (milliseconds).

    Args:
        decode_ms: Per decoded token.
        retrieval_ms: Per retrieval (index round trip).
        prefill_ms: Per prefill token (documents inserted into the context).
    """

    decode_ms: float = 25.0
    retrieval_ms: float = 300.0
    prefill_ms: float = 1.0

    def __post_init__(self) -> None:
        for name in ("decode_ms", "retrieval_ms", "prefill_ms"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")


class Handle:
    """An issued retrieval."""

    def __init__(self, ready_at: float = 0.0, result=None, future: Future | None = None) -> None:
        self.ready_at = ready_at
        self.result = result
        self.future = future
        self.cancelled = False


class SimClock:
    """Deterministic clock: decoding and retrievals advance ``now`` by the constants; retrievals overlap decoding."""

    def __init__(self, constants: ClockConstants | None = None) -> None:
        self.constants = constants or ClockConstants()
        self.now = 0.0

    def start(self) -> None:
        self.now = 0.0

    def decode(self) -> None:
        self.now += self.constants.decode_ms

    def prefill(self, tokens: int) -> None:
        self.now += tokens * self.constants.prefill_ms

    def submit(self, fn) -> Handle:
        return Handle(ready_at=self.now + self.constants.retrieval_ms, result=fn())

    def ready(self, handle: Handle) -> bool:
        return handle.ready_at <= self.now

    def wait(self, handle: Handle):
        self.now = max(self.now, handle.ready_at)
        return handle.result

    def cancel(self, handle: Handle) -> None:
        handle.cancelled = True

    def close(self) -> None:
        pass


class WallClock:
    """Real time: decode steps padded to ``decode_ms * scale``, retrievals in a thread pool with an injected sleep.

    Args:
        constants: The costs to emulate.
        scale: Factor on every sleep; ``now`` is reported divided by it.
    """

    def __init__(self, constants: ClockConstants | None = None, scale: float = 1.0) -> None:
        if scale <= 0:
            raise ValueError(f"scale must be > 0, got {scale}")
        self.constants = constants or ClockConstants()
        self.scale = scale
        self.executor = ThreadPoolExecutor(max_workers=2)
        self.t0 = time.perf_counter()
        self._step = self.t0

    def start(self) -> None:
        self.t0 = self._step = time.perf_counter()

    @property
    def now(self) -> float:
        return (time.perf_counter() - self.t0) * 1000.0 / self.scale

    def _seconds(self, ms: float) -> float:
        return ms * self.scale / 1000.0

    def decode(self) -> None:
        target = self._step + self._seconds(self.constants.decode_ms)
        pause = target - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
        self._step = time.perf_counter()

    def prefill(self, tokens: int) -> None:
        time.sleep(self._seconds(tokens * self.constants.prefill_ms))
        self._step = time.perf_counter()

    def submit(self, fn) -> Handle:
        delay = self._seconds(self.constants.retrieval_ms)

        def remote():
            time.sleep(delay)
            return fn()

        return Handle(future=self.executor.submit(remote))

    def ready(self, handle: Handle) -> bool:
        return handle.future.done()

    def wait(self, handle: Handle):
        result = handle.future.result()
        self._step = time.perf_counter()
        return result

    def cancel(self, handle: Handle) -> None:
        handle.cancelled = True
        handle.future.cancel()

    def close(self) -> None:
        self.executor.shutdown(wait=True)
