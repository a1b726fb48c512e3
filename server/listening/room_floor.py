"""The person above the room: what of a short utterance over a paused reply is theirs.

A backchannel is judged on its sound and its words (`server.listening.backchannel`), and both
were taken from the whole committed audio, room and all. Over babble or a TV at -45 dBFS RMS
(a tester, issue 24, over the protocol: `/work/breaker_s6`), the room's voices inside that
audio were syllables of the person's "yeah" and its pitch a question's terminal rise (the
room's talker at 150 Hz after Piper's 100 Hz voice: +4.5 st, "question", cut), and its words
were the person's ("time. Okay.", "in the waiting." for Piper's "okay" and "wait" over a TV).

Server VAD's room background (`server.listening.room_background.RoomBackground.loud_dbfs`: the
90th percentile level of the room's learned windows) says how loud the room is. What is
`ROOM_MARGIN_DB` above it is the person's:

- the prosody counts only frames above that floor (`floor_dbfs`, `prosody.analyse`'s
  `floor_dbfs`);
- the words deciding a paused reply are transcribed from the person's span only
  (`trim_room`): the room before the first and after the last frame above the floor is
  silenced, with `PAD_MS` kept each side for the person's soft onsets and endings; inside
  the span nothing changes (the person's quiet consonants between loud vowels stay).

Without a learned room (None) nothing changes.
"""

from __future__ import annotations

import numpy as np

ROOM_MARGIN_DB = 6.0
"""How far above the room's loud level (dB) a frame must be to be the person's. Measured on
`tests/room_sounds.py`'s babble and TV at -45 dBFS RMS with Piper and espeak-ng voices at
-6 dBFS peak (`tests/test_backchannel_rooms.py`): the room's loud level is -42 (babble) and
-40 (TV) dBFS, its own frames reach up to 4 dB above it, while the person's syllable nuclei
are 15-30 dB above it."""

FRAME_MS = 40
"""Level window (ms) of `trim_room`, the prosody's frame (`server.listening.prosody`)."""

HOP_MS = 10
"""Step (ms) of `trim_room`'s level windows."""

PAD_MS = 150
"""Audio (ms) kept before the first and after the last frame above the floor (`trim_room`):
a soft onset ("h", "s") or a fading ending under the floor is still the person's."""


def floor_dbfs(room_dbfs: float | None) -> float | None:
    """The level (dBFS, RMS) above which a frame is the person's, `ROOM_MARGIN_DB` over the
    room's loud level `room_dbfs`; None when no room was learned."""
    return None if room_dbfs is None else room_dbfs + ROOM_MARGIN_DB


def trim_room(samples: np.ndarray, sample_rate_hz: int, room_dbfs: float | None) -> np.ndarray:
    """`samples` (1-D float) with the room before and after the person silenced: zeros
    before the first `FRAME_MS` frame above `floor_dbfs(room_dbfs)` less `PAD_MS`, and after
    the last one plus `PAD_MS`. Unchanged (the same array) when no room was learned or no
    frame is above the floor (then nothing is the person's and nothing is taken away)."""
    floor = floor_dbfs(room_dbfs)
    frame = sample_rate_hz * FRAME_MS // 1000
    hop = sample_rate_hz * HOP_MS // 1000
    if floor is None or samples.size < frame:
        return samples
    windows = np.lib.stride_tricks.sliding_window_view(
        np.asarray(samples, dtype=np.float64), frame)[::hop]
    levels = 10.0 * np.log10(np.mean(np.square(windows), axis=1) + 1e-12)
    above = np.flatnonzero(levels >= floor)
    if not above.size:
        return samples
    pad = sample_rate_hz * PAD_MS // 1000
    start = max(0, int(above[0]) * hop - pad)
    end = min(samples.size, int(above[-1]) * hop + frame + pad)
    trimmed = np.zeros_like(samples)
    trimmed[start:end] = samples[start:end]
    return trimmed
