"""The echo reference of one reply, computed only once server VAD can use it.

The band envelope of a reply's audio (`server.listening.band_envelope.EchoReference`) is what server
VAD's echo guard compares the microphone with. It costs a few ms of CPU per second of audio
(measured with the uniform voice: about 2.6 ms per second at 24 kHz, three times the voice's
own synthesis), and most sessions never turn server VAD on: their envelopes were computed
for nothing. `ReplyEcho` therefore holds a reply's audio back as it is queued, while the
session has no server VAD, and computes its envelope the first time the reference is asked
for (`reference`), after which the reply's remaining pieces are computed as they are
synthesized, as before. Either way the envelope is computed from the PCM16 audio the client
receives, so the reference is the same, level for level, whenever it was first asked for,
except far behind the playing position: only the latest `HOLD_MS` of held audio is kept, and
audio before that reads as silence (the echo guard never looks there, see `HOLD_MS`).

Server VAD runs on an input worker thread (`server.input_work`), and so does `reference`, and
with it the computation of the held audio (up to `HOLD_MS` of it: 50 ms of CPU): the event loop
only queues each chunk (`add`), and the reference itself is touched by the input worker alone,
which adds the queued levels in reply order when it asks for it.
"""

from __future__ import annotations

import threading
from collections import deque

import numpy as np

from server.listening.band_envelope import EchoReference
from server.listening.pcm16 import pcm16_to_float

HOLD_MS = 20_000
"""Held reply audio kept (ms, the latest; at 24 kHz PCM16 at most 960 KB per session). The echo
guard compares the microphone heard after server VAD was turned on with the reference around
the position then playing, at most `LAG_RANGE_MS[1]` (1.2 s) before it; the newest audio
queued is at most the generation margin (`server.sending.GENERATION_AHEAD_MS`, 5 s) plus
one synthesis piece (a few seconds) beyond what was sent, which runs at most the pacing lead
(400 ms) ahead of playback: about 12.5 s from the newest audio back to the oldest position the
guard can compare. Held audio older than this is dropped and replaced by silence of the same
length, which keeps every later level at its position."""

_SILENCE_BLOCK_SAMPLES = 240_000
"""Silence is fed to the envelope in blocks of at most this many samples (bounded memory)."""


class ReplyEcho:
    """One reply's `EchoReference`, computed eagerly or on first use.

    Use, per synthesis piece of the reply (pieces in reply order, one at a time): read
    `eager` on the event loop when the piece starts; when True, the worker thread computes
    each chunk's levels with `envelope` (in order) and the loop adds them with `add`; when
    False, the loop adds each chunk's PCM16 with levels None, which holds it back.
    `reference` (on the session's input lane, one call at a time) computes what was held back
    and makes later pieces eager; `add` and `reference` may run at the same time.

    Args:
        response_id: the reply's response id.
        rate_hz: sample rate of the reply audio (the session's output rate).
        eager: compute levels as audio is synthesized from the start (server VAD is on).
    """

    def __init__(self, response_id: str, rate_hz: int, *, eager: bool) -> None:
        self.response_id = response_id
        self.eager = eager
        self._reference = EchoReference(rate_hz)
        self._lock = threading.Lock()
        self._levels: list[np.ndarray] = []
        self._held: deque[bytes] = deque()
        self._held_samples = 0
        self._hold_samples = rate_hz * HOLD_MS // 1000
        self._dropped_samples = 0

    def envelope(self, pcm16: bytes) -> np.ndarray:
        """`EchoReference.envelope` of the reply's next chunk, PCM16 LE (worker thread, eager
        pieces only, in reply order)."""
        return self._reference.envelope(pcm16_to_float(pcm16))

    def add(self, pcm16: bytes, levels: np.ndarray | None) -> None:
        """The next queued chunk of the reply (event loop): its PCM16 LE audio and the levels
        `envelope` computed for it, or None when its piece was not eager (held back, or
        computed here when `reference` was asked for while its piece ran)."""
        with self._lock:
            if levels is None and not self.eager:
                self._hold(pcm16)
                return
        if levels is None:
            levels = self.envelope(pcm16)
        with self._lock:
            self._levels.append(levels)

    def _hold(self, pcm16: bytes) -> None:
        """Keep a chunk of a piece that was not eager, and only the latest `HOLD_MS` of
        them (under the lock)."""
        self._held.append(pcm16)
        self._held_samples += len(pcm16) // 2
        while self._held_samples - len(self._held[0]) // 2 >= self._hold_samples:
            dropped = len(self._held.popleft()) // 2
            self._held_samples -= dropped
            self._dropped_samples += dropped

    def reference(self) -> EchoReference:
        """The reply's reference, with every chunk added so far (on the session's input
        lane); from now on the reply's pieces are eager. The held audio is computed here,
        while the event loop may go on adding chunks: the reference turns eager once nothing
        is held any more, so every chunk enters it in reply order."""
        while True:
            with self._lock:
                held, self._held = self._held, deque()
                dropped, self._dropped_samples = self._dropped_samples, 0
                self._held_samples = 0
                if not held and not dropped:
                    self.eager = True
                    levels, self._levels = self._levels, []
                    break
            while dropped:
                block = min(dropped, _SILENCE_BLOCK_SAMPLES)
                self._reference.append(np.zeros(block, dtype=np.float32))
                dropped -= block
            for pcm16 in held:
                self._reference.append(pcm16_to_float(pcm16))
        for rows in levels:
            self._reference.add_levels(rows)
        return self._reference
