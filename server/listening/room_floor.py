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
  `room_dbfs`), and a gap between syllables is an /h/ only when it holds more than the room;
- the words deciding a paused reply are transcribed from the person's span only
  (`trim_room`): from the first to the last stretch of frames above the floor that reaches
  near the loudest frame (`PERSON_RANGE_DB`: a second word after a pause, "yeah ... wait",
  is the person's), with `PAD_MS` kept each side for the person's soft onsets and endings;
  the room before and after is silenced (a TV's word that passes the floor but stays far
  below the person, too), and inside the span nothing changes (the person's quiet
  consonants between loud vowels stay, and so does the room between their words).

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

PAD_MS = 30
"""Audio (ms) kept before the first and after the last frame of the person's span
(`trim_room`): a soft onset ("h", "s") or a fading ending under the floor is still theirs.
The first frame above the floor already starts up to `FRAME_MS` before the loud onset.
Measured over a TV at -45 dBFS (`tests/test_backchannel_rooms.py`): with 60-120 ms the TV's
syllables just before the person were kept and read ("to make sense.", "about it." for
espeak-ng's "make sense" and Piper's "got it"); with 30, "That makes sense." and "Got it."."""

LEAD_MS = 300
"""Silence (ms) the ASR gets before the person's span when the words deciding a paused reply
are transcribed (`trim_room`'s `lead_ms`, `server.input_work`). Over a learned room, server
VAD starts a turn's audio at the person's voice onset less `vad.VOICE_ONSET_MARGIN_MS` (the
room before it is not the person), so the span began 10-30 ms into the audio, where in a
quiet room the turn keeps server_vad's `prefix_padding_ms` (270-300 ms before the first
syllable); tiny.en misreads a short word whose sound starts at the first sample. Measured on
the server's own decision audio of `benchmarks/bench_backchannel.py`'s room grid (issue 24):
Piper's "mm-hmm" over babble and a pink floor, read "in a month.", read "MM" with 200-300 ms
of silence in front (100 ms: one of the two), espeak-ng en-us's "yeah" over the pink floor
"here." -> "Yeah" (100-300 ms), the other 12 recordings' verdicts unchanged; and offline on
held-out voices cut at their onset (espeak-ng en-gb-scotland, en-us+m3, en-us+f5, en-us+f2,
en-us-nyc): "yeah" read "here." / "the end." in 5 of 5, read "Yeah." with 300 ms. 300 ms is
`prefix_padding_ms`: the lead a quiet room's turn has, and the offline tests'
(`tests.test_asr.decision_audio`)."""

FADE_MS = 10
"""Raised-cosine fade (ms) at each edge of the kept span (`trim_room`): no click that the
ASR could read as a plosive."""

MAX_GAP_MS = 250
"""Stretches of frames above the floor closer than this (ms) are one (`trim_room`): the
pauses and closures inside a short phrase ("makes sense", "oh, I see") are shorter."""

PERSON_RANGE_DB = 15.0
"""A stretch above the floor whose loudest frame is within this (dB) of the utterance's
loudest is the person's (`trim_room`). Measured over a TV at -45 dBFS RMS: its words next to
a person at -6 dBFS peak reach -33 dBFS, 16 dB under the person's loudest frame (-17); the
person's own words after a pause ("yeah ... wait", Piper) are within 3 dB of each other."""


def floor_dbfs(room_dbfs: float | None) -> float | None:
    """The level (dBFS, RMS) above which a frame is the person's, `ROOM_MARGIN_DB` over the
    room's loud level `room_dbfs`; None when no room was learned."""
    return None if room_dbfs is None else room_dbfs + ROOM_MARGIN_DB


def trim_room(samples: np.ndarray, sample_rate_hz: int, room_dbfs: float | None,
              lead_ms: int = 0) -> np.ndarray:
    """`samples` (1-D float) with the room before and after the person silenced: the
    person's span runs from the first to the last stretch of `FRAME_MS` frames above
    `floor_dbfs(room_dbfs)` (frames closer than `MAX_GAP_MS` joined) whose loudest frame is
    within `PERSON_RANGE_DB` of the loudest of all, widened by `PAD_MS` each side and faded
    in and out over `FADE_MS`; outside it, zeros, and zeros put in front when the span starts
    less than `lead_ms` (ms) after the first sample (`LEAD_MS` for the ASR). Unchanged (the
    same array) when no room was learned or no frame is above the floor."""
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
    apart = np.flatnonzero(np.diff(above) * HOP_MS > MAX_GAP_MS + FRAME_MS - HOP_MS)
    firsts = np.concatenate(([0], apart + 1))
    lasts = np.concatenate((apart, [above.size - 1]))
    person = [run for run in range(firsts.size) if levels[above[firsts[run]:lasts[run] + 1]]
              .max() >= levels.max() - PERSON_RANGE_DB]
    pad = sample_rate_hz * PAD_MS // 1000
    start = max(0, int(above[firsts[person[0]]]) * hop - pad)
    end = min(samples.size, int(above[lasts[person[-1]]]) * hop + frame + pad)
    trimmed = np.zeros_like(samples)
    trimmed[start:end] = samples[start:end]
    fade = min(sample_rate_hz * FADE_MS // 1000, (end - start) // 2)
    ramp = (0.5 - 0.5 * np.cos(np.linspace(0.0, np.pi, fade))).astype(samples.dtype)
    if start > 0:
        trimmed[start:start + fade] *= ramp
    if end < samples.size:
        trimmed[end - fade:end] *= ramp[::-1]
    missing = sample_rate_hz * lead_ms // 1000 - start
    if missing > 0:
        return np.concatenate([np.zeros(missing, dtype=trimmed.dtype), trimmed])
    return trimmed
