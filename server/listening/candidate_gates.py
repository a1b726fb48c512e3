"""The gates a `server.listening.vad.TurnDetector` candidate turn passes besides the echo's:
the level range of its recent windows (a hum's level does not move, speech's does), where its
speech stops being the room's (`server.listening.room_background`'s gate), and whether a
candidate that ended too soon for a turn over a reply is judged whole as a short word. Sans-I/O
functions over window positions (ms) and levels (dBFS).
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Protocol

from server.listening.silero_vad import WINDOW_MS

HELD_LOUD_DB = 10.0
"""A reconsidered candidate's turn starts where its speech came this close (dB) to its
loudest window (`loud_span`)."""

MODULATION_FLOOR_DB = 30.0
"""Windows this far below the loudest recent one do not count for `min_level_range_db` (the
silence right after a hum stops, which Silero still scores at about 0.6)."""


def past_the_room(room_gate: Callable[[int, int], bool] | None, start_ms: int,
                  window_end_ms: int) -> int:
    """Where a candidate turn the room gate rejected before (speech from `start_ms`, passed at
    `window_end_ms`, ms) becomes the person: its start moved on, window by window, while its
    speech from `start_ms` to that window's end is still the room's by `room_gate` (at most
    to the last window before `window_end_ms`). The gate asks every `min_speech_ms` or so,
    so the room talking since its last rejection would otherwise begin the turn: measured,
    Piper "Wait, stop, ..." 330 ms after the last rejection of babble at -55 dBFS RMS began
    630 ms before the voice."""
    moved_ms = start_ms
    while (room_gate is not None and moved_ms + 2 * WINDOW_MS <= window_end_ms
           and room_gate(start_ms, moved_ms + WINDOW_MS)):
        moved_ms += WINDOW_MS
    return moved_ms


def room_held_start(room_voice: Callable[[int, int, int], int] | None,
                    room_gate: Callable[[int, int], bool] | None, first_ms: int, start_ms: int,
                    window_end_ms: int, padding_ms: int) -> int:
    """Where a candidate the room gate held back before and passes now (speech from
    `start_ms`, its first window at `first_ms`, passed at `window_end_ms`, ms) starts: at the
    person's voice `room_voice` finds before `start_ms` (over gaps up to `padding_ms`), else
    past the room's windows (`past_the_room`)."""
    voice_ms = start_ms if room_voice is None else room_voice(first_ms, start_ms, padding_ms)
    if voice_ms < start_ms:
        return voice_ms
    return past_the_room(room_gate, start_ms, window_end_ms)


def level_range_open(recent: collections.deque[tuple[int, float | None]], start_ms: int,
                     min_level_range_db: float) -> bool:
    """The level-range gate (`TurnDetectionConfig.min_level_range_db`) over a candidate's
    recent (window end ms, level dBFS) pairs, its speech from `start_ms`: its windows after
    the first, those within `MODULATION_FLOOR_DB` of the loudest, must differ by
    `min_level_range_db` (dB); open while a level is unknown, with fewer than two such
    windows, or with a range of 0."""
    known = [(end_ms, level) for end_ms, level in recent if level is not None]
    if len(known) < len(recent):
        return True
    modulated = [level for end_ms, level in known if end_ms - WINDOW_MS > start_ms]
    if len(modulated) >= 2 and min_level_range_db > 0:
        loudest = max(modulated)
        audible = [level for level in modulated if level >= loudest - MODULATION_FLOOR_DB]
        if loudest - min(audible) < min_level_range_db:
            return False
    return True


class WordMinimum(Protocol):
    """What `ended_word_heard_whole` reads of `server.listening.vad.TurnDetectionConfig`."""

    min_speech_ms: int
    min_level_range_db: float


def ended_word_heard_whole(playing: bool, start_ms: int, speech_end_ms: int,
                           config: WordMinimum,
                           levels: collections.deque[tuple[int, float | None]]) -> bool:
    """Whether a candidate whose speech (from `start_ms` to `speech_end_ms`, ms) ended before
    it lasted the minimum speech of a reply playing (`echo_min_speech_ms`, 200) is judged whole
    as a short word instead of dropped: the assistant is `playing`, its speech lasted the idle
    minimum `config.min_speech_ms` (120) and its `levels` (window end ms, level dBFS), those
    up to `speech_end_ms`, pass the level-range gate (`level_range_open` with
    `config.min_level_range_db`). The caller then holds it back as it holds a candidate the
    echo gate rejected (`TurnDetector._reconsider`): its turn starts once the echo gate, over
    the word and the silence after it (where an echo would play on with the reply), or
    `echo_refuted`, says it was not the reply's echo, and the room gate passes it.

    Measured: Piper "Hey." at length_scale 0.6 (120 ms of sound) over a Piper reply with no
    echo in the microphone ran 192 ms of Silero speech from a window over `echo_threshold`, and
    was dropped at 4 of 4 positions; espeak-ng en-029 "Hey." at 280 words/min (147 ms) at 2 of
    4 (issue 24's tester: also "Stop." and "No." at 250-280 words/min). The reply's minimum
    stays 200 ms while the candidate goes on: the echo gate needs `mic_timeline.MIN_FRAMES`
    (200 ms) of frames to call speech still going on echo."""
    spoken = collections.deque((end_ms, level) for end_ms, level in levels
                               if start_ms < end_ms <= speech_end_ms)
    return (playing and speech_end_ms - start_ms >= config.min_speech_ms
            and level_range_open(spoken, start_ms, config.min_level_range_db))


def loud_span(levels: collections.deque[tuple[int, float | None]], first_ms: int,
              speech_end_ms: int) -> tuple[int, int]:
    """(start, end) ms of a candidate's windows (`levels`: (window end ms, level dBFS); its
    speech from `first_ms` to `speech_end_ms`) within `HELD_LOUD_DB` of its loudest: from the
    start of the first such window to the end of the last (its speech from `first_ms` to
    `speech_end_ms` when a level is unknown). A candidate held back as echo and then found to
    be more than the echo may have begun on a quieter echo, before the voice that made it
    more, and may go on with a quieter echo after that voice."""
    if not levels or any(level is None for _, level in levels):
        return first_ms, speech_end_ms
    known = [(end_ms, level) for end_ms, level in levels if level is not None]
    loudest = max(level for _, level in known)
    loud = [end_ms for end_ms, level in known if level >= loudest - HELD_LOUD_DB]
    return max(first_ms, loud[0] - WINDOW_MS), loud[-1]
