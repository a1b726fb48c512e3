"""Echo detection: is the microphone hearing the assistant's own reply, or a person?

Double-talk detection by cross-correlation (Benesty, Morgan, Cho, "A new class of doubletalk
detectors based on cross-correlation", IEEE Trans. Speech and Audio Processing 8(2), 2000): the
normalized correlation between the far-end signal (the reply the server sent) and the
microphone is close to 1 while the microphone holds only echo, and drops when a near-end talker
adds a signal the far end does not explain. The echo path here is unknown and not linear (a
loudspeaker, the room, the browser's echo canceller and automatic gain control, which boosts a
quiet echo by about 10 dB and keeps changing its gain), so instead of waveforms this compares
*band envelopes*: every 10 ms, the energy of the last 30 ms in the bands of `BAND_EDGES_HZ`,
in dB. A gain on the path is an
offset per band in dB, which the per-band mean removal of the Pearson correlation cancels; an
unknown delay is searched over `LAG_RANGE_MS`. The delay is one of time, not of reply position:
the microphone hears what played that long before, which is where the reply stood then, stalls
and all (`MicTimeline.playing_frames`).

- `server.listening.band_envelope.BandEnvelope` turns a stream of samples (any rate) into
  such frames, and `EchoReference` holds the envelope of one reply's audio, indexed by its
  position in the reply (ms), recorded by the I/O layer as the audio is queued for sending.
- `server.listening.mic_timeline.MicTimeline` keeps the microphone's envelope at 16 kHz, each
  frame tagged with the reply position the session estimated was playing when it arrived, and
  its noise floor.
- `EchoDetector` (here) learns the echo path from stretches of that timeline the reply alone
  explains and holds it (`server.listening.echo_path`), and answers `is_echo`,
  `voice_onset_ms` and `echo_levels` against it.

A room adds two things the reply does not hold. Its noise floor: band levels near it are the
noise's random levels, not the echo's, so both envelopes are floored at the microphone's noise
floor (a minimum-statistics estimate) before they are compared. Its reverberation: the end of
every word, and of the reply, keeps sounding after the reply's audio fell silent, so the
reference is also compared with a decaying tail. And the level model behind the correlation
says what a person adds: the microphone's excess over the echo (reference plus the echo's gain)
plus the noise, per frame, which marks where someone else's voice begins. The correlation
finds the path; the excess over the held path decides (issue 24: a real "Stop." with no echo in
the microphone correlated 0.81-0.92 with some reply word, and was taken for the echo).

Sans-I/O: plain objects and numpy. Constants and the measurements behind them are with each.
"""

from __future__ import annotations

import numpy as np

from server.listening.band_envelope import BAND_EDGES_HZ, FRAME_MS, EchoReference
from server.listening.echo_path import (
    AGC_RISE_DB,
    ECHO_CORRELATION,
    EXCESS_DB,
    FOLLOWED_CORRELATION,
    LAG_DRIFT_MS,
    LEARN_GUARD_MS,
    LEARN_STEP_MS,
    LEARN_WINDOW_MS,
    MISSING_DB,
    ONSET_EDGE_DB,
    ONSET_RUN_FRAMES,
    UNEXPLAINED_SHARE,
    EchoPath,
    aligned_at,
    best_lag,
    comparable_levels,
    deficit_db,
    echo_db,
    echo_gain,
    excess_db,
    learn_path,
    reverberant,
    run_starts,
    sounds_at_every_lag,
    voice_over_echo,
)
from server.listening.held_echo import EchoMatch, HeldEcho
from server.listening.mic_timeline import (
    LAG_RANGE_MS,
    MIN_FRAMES,
    NOISE_HISTORY_MS,
    MicTimeline,
    Stretch,
)

ECHO_TAIL_MS = LAG_RANGE_MS[1]
"""How long after a reply stopped playing (its last ACK) the microphone may still hear it (ms):
the longest lag searched."""

SILENT_LEAD_LAG_MS = 800
"""Past this lag (ms), the echo gain a comparison measures (`EchoDetector._compare`) counts only
the frames where the reply sounded at that lag (`echo_path.echo_gain`'s `sounding_only`).
Early in the session's first reply such a lag reaches back before the reply began: its
reference is silence, and a gain measured on it is the microphone's own sound over nothing
(54-75 dB, everything then reads as that echo), while the reply's start lines up with any
onset. With the lag search widened to 1.2 s (`LAG_RANGE_MS`), espeak-ng en-029's "hee" 0.9 s
into the first reply matched the reply's start at 870 ms (0.70) and was held back as that
echo, and lost its backchannel (tests/test_backchannel_done.py); an echo really that late is
still echo where it follows the reply (`ECHO_CORRELATION`: tests/test_echo_long_latency.py).
Within 800 ms, where the first reply's first second was measured
(`benchmarks/bench_interruptions.py` table 2), the gain is measured as before: there a
"Stop." 0.3 s in over a -30 dB echo is held back at 350 ms, then heard at its voice (taken at
once, its audio began 354 ms early, in the echo: its lead-in before the reply cannot place
the onset), and short sounds 0.6-0.75 s in are still held back as the echo (tests/test_echo.py
`test_a_sound_in_the_first_reply_s_first_second_is_no_echo_of_its_start`)."""

LEAD_IN_MS = 300
"""Microphone audio before a candidate's start that is compared too (ms). Measured (as for
`ECHO_CORRELATION`, with the earlier 10 ms rectangular frames): with 100 ms the worst echo
stretch correlated 0.893 instead of 0.907, and a person over the echo was accepted no sooner."""

MAX_SPAN_MS = 1000
"""Longest stretch of microphone audio compared (ms), ending at the decision."""

WEAK_ECHO_CORRELATION = 0.38
"""A stretch correlating at least this well with the reply is echo when nothing in it is
unexplained (`EchoDetector.is_echo`). Measured (tests/echo_room.py rooms, offline): a -30 dB
echo only 5 dB over a -50 dBFS RMS pink noise floor correlated 0.69-0.92 with zero excess; a
person over it, 0.45-0.53 with 40-80 % of the frames 6 dB and more above the echo (the share
rejects them, not the correlation). An echo whose stretch spans a playback stall (the page's
jitter buffer ran dry: a silence in the echo the reference did not have, when the microphone
was mapped to the reply by one offset) correlated 0.40 with 8 % unexplained and started a turn
at 0.5 (since then the reference follows the stall, `MicTimeline.playing_frames`). At 0.35 a
person over a Piper echo in the page (tests/test_browser_microphone.py) was held back as echo
in 2 of 3 runs; 0.38 passed both tests (echo rooms 35 of 35, that browser test 3 of 3)."""

ONSET_EXCESS_DB = 10.0
"""Excess (dB) that marks a voice onset, higher than `EXCESS_DB`: the echo's gain measured
before the candidate (`EchoDetector.voice_onset_ms`) may be a few dB off later on (measured
over loopback: echo-only frames up to 9 dB, a person at -12 dBFS peak 11-30 dB)."""


CUT_RUN_FRAMES = 2
"""Frames (20 ms) reaching `EXCESS_DB` at the end of the audio searched that mark a voice onset
when no run of `ONSET_RUN_FRAMES` was found (`EchoDetector.voice_onset_ms`): a loud person
triggers the VAD within a window of their first word, and the turn asks for its onset then,
before such a run could be complete. Measured over
loopback (tests/test_echo_server.py, Piper "What was the name of that street?" at -12 dBFS
peak over a -30 dB echo): the window ended 40 ms after the onset with only its last two frames
10 dB over the echo (9.8, 13.0, 15.3 dB), no run was found, and the turn's audio began with the
300 ms prefix padding of echo in 4 of 6 runs."""

SHARE_SPAN_MS = 250
"""The unexplained share is taken over at least this much audio (ms) before the decision: a
share needs frames. Server VAD asks about a candidate on every window (32 ms) once it held
one back as echo; over so few frames one stray frame above the echo made a share of 10-33 %, and
three such windows in a row let the echo start a turn (bench_echo, loaded machine). A person
over the echo keeps 40-80 % of the frames above it over any 250 ms of their speech."""

MISSING_FRAMES = 10
"""A run of this many consecutive frames (100 ms) `MISSING_DB` short of a supposed echo refutes
it (`EchoDetector.echo_refuted`). A run, not a count: a paced reply's playback stalls (the
page's jitter buffer ran dry for about 50 ms while the playing position the session estimates
ran on, tests/test_echo_paced_playback.py) left runs of 5 short frames each in a 0 and a -6 dB
echo, and at 10 such frames in all that echo started a turn."""

REFUTED_GAIN_QUANTILE = 0.75
"""Quantile of the candidate's level over the reply (`echo_gain`) taken as the gain of the echo
it would be (`EchoDetector.echo_refuted`): the voice in a candidate begun on a quieter echo
(bench_interruptions table 2, a -30 dB echo) sets it, not the echo's frames before it (with
the median, 11 of 240 first-reply interruptions were missed instead of 9)."""

REFUTE_SPAN_MS = 2500
"""Longest stretch `EchoDetector.echo_refuted` compares (ms, ending at its decision): the
candidate (up to a few words), its lead-in and `server.listening.vad.RECONSIDER_MS` after it."""

ROOM_ECHO_CORRELATION = 0.7
"""A second of the microphone heard while the reply plays whose best correlation with the
reply stays below this holds no echo that rules it (`EchoDetector.echo_rules`): the room
(babble, a TV) may be learned from it. Measured (`tests/echo_room.py` rooms, 1 s spans every
250 ms over a Piper reply): with no echo, a TV talker at -45 dBFS RMS correlated 0.24-0.64,
babble at -45 and -55 dBFS 0.19-0.62; the echo alone, -30 dB over a pink floor 0.92-1.0, -10 dB
in a 400 ms RT60 room 0.82-0.94; a -30 dB echo under that TV 0.20-0.81 (the TV is the louder
there)."""

TURN_HISTORY_MS = 15_000
"""Microphone levels kept (ms) for `EchoDetector.echo_levels`, which a turn's echo suppression
asks for when the turn is committed: its start (where the echo overlaps the first words) and
the lead-in before it must still be there. A turn committed later than this after its start
is transcribed without echo suppression. Costs 12 KB per second kept (five float64 levels and
one tag per 10 ms frame)."""

HEARD_LAG_HOLD_MS = MAX_SPAN_MS
"""With no echo path held, a lag the echo was clearly heard at (`EchoDetector.is_echo`: a
match reaching `ECHO_CORRELATION` with less than `UNEXPLAINED_SHARE` of its frames
unexplained, its lead-in alone matching as well there: `_lead_in_heard_at`) holds for
candidates starting up to this long (ms) after that match's end: lags past
`SILENT_LEAD_LAG_MS` are searched only up to `LAG_DRIFT_MS` beyond it. A loudspeaker's
latency does not jump by hundreds of ms within a second (the playing position's estimate
drifts by `LAG_DRIFT_MS`), but with the lag search to 1.2 s (`LAG_RANGE_MS`) a person's onset
lines up by chance with the reply's first word at a long lag, where the reference before it
is silence as the microphone's was: measured (tests/test_local_audio.py, the terminal
client), a person's "Wait" 1 s into a reply over a -26 dB echo at 0 lag, heard as the echo at
30-40 ms (0.95-0.99) until 1056 ms, matched the reply's first word at 1020-1030 ms with
0.82-0.89 and was held back as that echo for 160 ms. Within 800 ms the search is as it was
before the range was widened: searched only within `LAG_DRIFT_MS` of the held lag, a chance
lag held there (-200 and 670 ms in a room whose echo came 250 ms late) kept the echo's own out
of the search, and `benchmarks/bench_interruptions.py` table 2 missed 5 of 240 (4 without);
bounding lags past 800 ms only, table 2 is main's (800 ms search) case by case: 5 of 240 and
1 false."""

KEEP_MS = max(MAX_SPAN_MS + LEAD_IN_MS + 1000, NOISE_HISTORY_MS, TURN_HISTORY_MS + LEAD_IN_MS)
"""Microphone audio the detector keeps (ms): its longest comparison with the lead-in and a
second of slack, the noise floor's history, and a turn's echo suppression."""


class EchoDetector:
    """The microphone's band envelope with the playing reply position of every frame, and the
    echo path held for the session (`server.listening.echo_path.EchoPath`).

    Feed the 16 kHz microphone stream in order (`feed`), each piece with the reply position
    (ms) the session estimated was playing when it arrived and that reply's `EchoReference`;
    frame k ends at 10 k + 10 ms of the stream (`BandEnvelope`). `is_echo` then judges a
    stretch of the microphone against the reply. The echo path is learned from the stream as
    it is judged (`learn`) and kept across replies: the room and the device stay.
    """

    def __init__(self) -> None:
        self._mic = MicTimeline(KEEP_MS)
        self._gain = np.full(len(BAND_EDGES_HZ) - 1, -np.inf)
        self.path: EchoPath | None = None
        """The held echo path (None: no stretch of the stream taught one yet)."""
        self._next_window_end = LEARN_WINDOW_MS // FRAME_MS
        self._rules: tuple[int | None, bool] = (None, True)
        self.held = HeldEcho(self._mic, lambda: self.path)
        """The microphone measured against the held path (`HeldEcho`)."""
        self._heard: tuple[int, int] | None = None
        """With no path held, the lag (ms) the echo was last clearly heard at and where that
        match ended (ms on this stream): `HEARD_LAG_HOLD_MS`."""

    def feed(self, pcm_16k: np.ndarray, playback_ms: int | None,
             reference: EchoReference | None) -> None:
        """Append microphone samples (1-D float at 16 kHz), with the reply position (ms)
        playing when the last of them arrived (None: no reply plays) and that reply's envelope
        (None: nothing to compare with); see `MicTimeline.feed`."""
        self._mic.feed(pcm_16k, playback_ms, reference)

    def learn(self, until_ms: int) -> EchoPath | None:
        """Learn the echo path from every learning window not learned yet that ends by
        `until_ms` (ms on this stream); returns the path held then.

        Windows span `LEARN_WINDOW_MS` and end at every multiple of `LEARN_STEP_MS`; each is
        compared with the reply at its best lag (`_search`: its gain on the reference that
        matched, dry or with the tail; what it explains with the tail, as `held_excess` judges)
        and teaches the path when the reply alone explains it
        (`server.listening.echo_path.learn_path`). A window whose frames are no longer kept,
        or with fewer than `MIN_FRAMES` tagged frames, teaches nothing."""
        step, span = LEARN_STEP_MS // FRAME_MS, LEARN_WINDOW_MS // FRAME_MS
        end = self._next_window_end
        first = self._mic.first
        last = min(until_ms // FRAME_MS, self._mic.end)
        end = max(end, first + span + (step - (first + span) % step) % step)
        while end <= last:
            hi = end - first
            stretch = self._mic.stretch(hi - span, hi, 0)
            if stretch is not None:
                correlation, lag_ms, aligned = self._search(stretch)
                tail = aligned_at(reverberant(stretch.block), stretch.count,
                                  stretch.max_lag, lag_ms)
                learned = learn_path(self.path, stretch.mic, aligned, tail, stretch.floor,
                                     correlation, lag_ms,
                                     sounds_at_every_lag(stretch.block, stretch.count))
                self.path = learned if learned is not None else self.path
            end += step
        self._next_window_end = end
        return self.path

    def is_echo(self, start_ms: int, end_ms: int) -> bool:
        """True when the candidate speech from `start_ms` to `end_ms` (ms on this stream) is
        the playing reply's echo.

        With an echo path held (`learn`, from windows ending `LEARN_GUARD_MS` before
        `start_ms`): less than `UNEXPLAINED_SHARE` of the frames from `start_ms`, and of at
        least the last `SHARE_SPAN_MS`, are `EXCESS_DB` above the held echo plus the noise
        floor (`held_excess`), or above the echo at the lag matched best now (`_searched_echo`).
        Speech energy the held echo does not explain is the person, whatever the correlation:
        with no echo in the microphone (a headset) the held path explains nothing. With no path
        yet (the first `LEARN_WINDOW_MS` of a session's first reply): `match`'s correlation
        reaches `ECHO_CORRELATION`, or `WEAK_ECHO_CORRELATION` with the unexplained share (at
        the lead-in's gain) below `UNEXPLAINED_SHARE`, searched only near the lag the echo was
        clearly heard at within `HEARD_LAG_HOLD_MS` before `start_ms` no further than
        `LAG_DRIFT_MS` past it where that is past `SILENT_LEAD_LAG_MS`. False when nothing
        could be compared."""
        share_from_ms = min(start_ms, end_ms - SHARE_SPAN_MS)
        if self.learn(start_ms - LEARN_GUARD_MS) is None:
            heard = self._heard
            longest_ms = None
            if heard is not None and start_ms - heard[1] <= HEARD_LAG_HOLD_MS:
                longest_ms = max(SILENT_LEAD_LAG_MS, heard[0] + LAG_DRIFT_MS)
            match = self.match(start_ms, end_ms, longest_ms)
            explained = match.unexplained_share(share_from_ms) < UNEXPLAINED_SHARE
            if match.correlation >= ECHO_CORRELATION and explained and self._lead_in_heard_at(
                    start_ms, match.lag_ms):
                self._heard = (match.lag_ms, end_ms)
            return match.correlation >= ECHO_CORRELATION or (
                match.correlation >= WEAK_ECHO_CORRELATION and explained)
        held = self.held.held_excess(share_from_ms, end_ms)
        if held is None:
            return False
        if held.unexplained_share(share_from_ms) < UNEXPLAINED_SHARE:
            return True
        return self._searched_echo(start_ms, end_ms, share_from_ms)

    def echo_refuted(self, first_ms: int, speech_end_ms: int, end_ms: int) -> bool:
        """True when, with no echo path held yet, what the microphone heard from `LEAD_IN_MS`
        before `first_ms` to `end_ms` (ms on this stream) refutes that the candidate's speech
        from `first_ms` to `speech_end_ms` is the reply's echo.

        The echo it would be: the reference at the lag the candidate and its lead-in match
        best (`_search`), at the gain the candidate's speech has over it (`echo_gain`, median).
        Such an echo cannot fall silent while the reply it repeats plays on: it is refuted when
        `MISSING_FRAMES` frames fall `MISSING_DB` short of it (`deficit_db`): before the
        candidate, in its pauses, or after it. False with a path held (`is_echo` judges by
        it), or when nothing could be compared."""
        if self.learn(first_ms - LEARN_GUARD_MS) is not None:
            return False
        lo = self._mic.index(max(first_ms - LEAD_IN_MS, end_ms - REFUTE_SPAN_MS))
        speech_hi = self._mic.index(speech_end_ms)
        stretch = self._mic.stretch(lo, speech_hi, self._mic.index(end_ms) - speech_hi)
        if stretch is None:
            return False
        aligned = self._search(stretch)[2]
        speech = slice(max(self._mic.index(first_ms) - stretch.lo, 0), stretch.count)
        gain, _, _ = echo_gain(stretch.mic[speech], aligned[speech], stretch.floor,
                               REFUTED_GAIN_QUANTILE)
        short = deficit_db(stretch.mic, aligned, gain, stretch.floor) >= MISSING_DB
        return run_starts(short, MISSING_FRAMES).size > 0

    def echo_rules(self, end_ms: int) -> bool:
        """True unless the second of microphone around `end_ms` (ms on this stream; from
        `MAX_SPAN_MS` / 2 before the `LEARN_STEP_MS` step nearest to it, to as long after)
        correlates with the reply below `ROOM_ECHO_CORRELATION` (`match`): the reply's echo
        may rule what the microphone heard there, so the room is not to be learned from it.
        True when nothing could be compared (too few frames tagged with a reply position,
        or not all of that second heard yet). One correlation per step, kept for the
        windows asking about the same step."""
        step_ms = round(end_ms / LEARN_STEP_MS) * LEARN_STEP_MS
        half_ms = MAX_SPAN_MS // 2
        if self._mic.end * FRAME_MS < step_ms + half_ms:
            return True
        if step_ms != self._rules[0]:
            correlation = self.match(step_ms - half_ms + LEAD_IN_MS, step_ms + half_ms)
            self._rules = (step_ms, not 0.0 < correlation.correlation < ROOM_ECHO_CORRELATION)
        return self._rules[1]

    def _searched_echo(self, start_ms: int, end_ms: int, share_from_ms: int) -> bool:
        """The candidate is the echo at the lag it matches best now within `LAG_DRIFT_MS` of
        the held lag (the playing position's estimate drifts by 100 ms within a reply while a
        client waits for audio without ACKs): over `LEAD_IN_MS` before `start_ms` to `end_ms`
        (at most `MAX_SPAN_MS`), at that lag (`_search`), less than `UNEXPLAINED_SHARE` of the
        frames from `share_from_ms` are `EXCESS_DB` above the reverberant reference at the held
        gain plus the noise; or, if that lag correlates at least `ECHO_CORRELATION` and no
        voice begins over the echo there at the held gain (`voice_over_echo`: a 6 dB rise
        within 50 ms where the echo sounds, which neither an AGC nor a drifting position
        makes), at the stretch's own gain (`echo_gain`) when it rose at most `AGC_RISE_DB`
        over the held gain in every band where both are known (an AGC lifted the echo); or
        it follows the reply within `LAG_DRIFT_MS` of the held lag as closely as
        `FOLLOWED_CORRELATION`. Never without a held lag: with no echo heard, no correlation
        makes speech the echo. (Over the whole lag range a person at -6 dBFS over a 0 dB echo
        lined up with a reply word 680 ms off the held lag and was taken for it; with the dry
        reference, a -10 dB echo in a 400 ms RT60 room started a turn. Without the voice
        rule, Piper "Wait." at -6 dBFS peak whose onset fell on a loud reply syllable under a
        -10 dB echo correlated 0.91-0.93 and its 8-10 dB over the echo were taken for an AGC:
        the reply played on, tester F1.)"""
        path = self.path
        if path is None or path.lag_ms is None:
            return False
        lo = self._mic.index(max(start_ms - LEAD_IN_MS, end_ms - MAX_SPAN_MS, 0))
        stretch = self._mic.stretch(lo, self._mic.index(end_ms), 0)
        if stretch is None:
            return False
        correlation, lag_ms, _ = self._search(stretch, path.lag_ms)
        aligned = aligned_at(reverberant(stretch.block), stretch.count, stretch.max_lag, lag_ms)
        first_ms = stretch.first_ms

        def explained(gain: np.ndarray) -> bool:
            excess = excess_db(stretch.mic, aligned, gain, stretch.floor)
            match = EchoMatch(correlation, lag_ms, excess, first_ms)
            return match.unexplained_share(share_from_ms) < UNEXPLAINED_SHARE

        if explained(path.gain_db):
            return True
        if correlation < ECHO_CORRELATION:
            return False
        if voice_over_echo(stretch.mic, aligned, path.gain_db, stretch.floor):
            return False
        if correlation >= FOLLOWED_CORRELATION:
            return True
        gain, _, _ = echo_gain(stretch.mic, aligned, stretch.floor)
        both = np.isfinite(gain) & np.isfinite(path.gain_db)
        return not np.any(gain[both] - path.gain_db[both] > AGC_RISE_DB) and explained(gain)

    def match(self, start_ms: int, end_ms: int, longest_ms: int | None = None) -> EchoMatch:
        """Best normalized correlation between the microphone from `start_ms` - `LEAD_IN_MS`
        (at most `MAX_SPAN_MS` back) to `end_ms` and the reference, over `LAG_RANGE_MS` (up
        to `longest_ms` when given: `_search`), with
        `excess_db` at the best lag and the echo gain of the lead-in (the part before
        `start_ms`, when it holds at least `MIN_FRAMES` / 2 frames; else of the whole stretch).

        For each lag, each microphone frame is compared with the reference frame that was
        playing that long before it (`MicTimeline.playing_frames`, stalls and all), dry and
        with a reverberant tail (`REVERB_DECAY_DB_PER_FRAME`). Both stretches get the
        `DYNAMIC_RANGE_DB` floor and the noise floor (`MicTimeline.noise_floor` +
        `NOISE_MARGIN_DB`, for the reference at the level the echo has: its loudest frame per
        band mapped to the microphone's) and lose each band's mean; the correlation is the sum
        of their products over the root of the products of their sums of squares (Pearson's r
        over all bands and frames with per-band means). Correlation 0.0 when fewer than
        `MIN_FRAMES` frames are tagged, or either stretch is constant.
        """
        lo = self._mic.index(max(start_ms - LEAD_IN_MS, end_ms - MAX_SPAN_MS, 0))
        lead = self._mic.index(start_ms) - max(lo, 0)
        return self._compare(lo, self._mic.index(end_ms), 0,
                             lead if lead >= MIN_FRAMES // 2 else None, longest_ms=longest_ms)[0]

    def _lead_in_heard_at(self, start_ms: int, lag_ms: int) -> bool:
        """True when the `LEAD_IN_MS` before `start_ms` (ms on this stream) alone matches the
        reply at least `ECHO_CORRELATION` within `LAG_DRIFT_MS` of `lag_ms`: the echo was heard
        there before the candidate, not only in it: a person's own words, with no echo in the
        microphone, matched some reply word at 0.81-0.92 (issue 24's "Stop.")."""
        hi = self._mic.index(start_ms)
        stretch = self._mic.stretch(max(hi - LEAD_IN_MS // FRAME_MS, 0), hi, 0)
        return stretch is not None and self._search(stretch, lag_ms)[0] >= ECHO_CORRELATION

    def voice_onset_ms(self, from_ms: int, end_ms: int,
                       echo_until_ms: int | None = None) -> int | None:
        """Where a sound the reply does not explain begins, searching from `from_ms` to
        `end_ms` (ms on this stream).

        The excess over the echo and the noise (`EchoMatch.excess_db`) is taken against the
        held echo path (`held_excess`, learned from windows ending `LEARN_GUARD_MS` before
        `from_ms`); with no path yet, at the lag of the `LEAD_IN_MS` before `from_ms` and the
        gain of the `LEAD_IN_MS` before `echo_until_ms` when given and earlier (audio known
        to be no person's: before the candidate's first speech window), else of the same
        lead-in. The onset is the start of the first run of `ONSET_RUN_FRAMES` frames from
        `from_ms` whose excess reaches `ONSET_EXCESS_DB` (with a path held and no such run,
        `EXCESS_DB`: the held gain is not a lead-in's guess, and a turn asked for its onset
        50 ms into a soft "No." found no 10 dB run and started 500 ms early, on the echo), or
        with none, of `CUT_RUN_FRAMES` that reach `EXCESS_DB` at `end_ms` (the voice began
        right before it), moved back over the frames right before it whose excess rises
        toward it from `ONSET_EDGE_DB` (a soft onset). None when
        nothing could be compared (no reply, too few tagged frames) or no such run exists:
        nothing tells the person from the echo."""
        thresholds: tuple[float, ...] = (ONSET_EXCESS_DB,)
        if self.learn(from_ms - LEARN_GUARD_MS) is not None:
            match = self.held.held_excess(from_ms, end_ms)
            thresholds += (EXCESS_DB,)
        else:
            match = self._lead_in_excess(from_ms, end_ms, echo_until_ms)
        if match is None or match.excess_db.size < ONSET_RUN_FRAMES:
            return None
        excess = match.excess_db
        first = max(0, (from_ms - match.first_ms) // FRAME_MS)
        start = _onset_run_start(excess[first:], thresholds)
        if start is None:
            return None
        index = first + start
        while index > first and ONSET_EDGE_DB <= excess[index - 1] < excess[index]:
            index -= 1
        return match.first_ms + index * FRAME_MS

    def _lead_in_excess(self, from_ms: int, end_ms: int,
                        echo_until_ms: int | None) -> EchoMatch | None:
        """`voice_onset_ms`'s excess with no path held: the echo at the lag of the
        `LEAD_IN_MS` before `from_ms` (unaligned where that lag is chance: `_compare`'s
        `chance_unaligned`) and the gain of the lead-in before `echo_until_ms` (when given and
        earlier) or before `from_ms`; None when nothing could be compared.

        A lead-in with no echo in it (a room's babble, 0.15-0.25 with the reply) matches
        some lag by chance, and the wider the lag range the likelier a lag whose frames the
        room's own ups and downs rise over: Piper's "mm-hmm" over babble, 3.3 s into the
        first reply, matched 1130 ms with `LAG_RANGE_MS` to 1.2 s (350 ms to 800 ms), its
        onset's rising edge then took in 30 ms of babble at 2-3 dB over that echo, and tiny.en
        read "MMM." (cut) for "MM" (resumed)."""
        gain = None
        if echo_until_ms is not None and echo_until_ms < from_ms:
            clean_hi = self._mic.index(echo_until_ms)
            clean, clean_gain, _ = self._compare(clean_hi - LEAD_IN_MS // FRAME_MS, clean_hi,
                                                 0, chance_unaligned=True)
            if clean.correlation > 0.0:
                gain = clean_gain
        hi = self._mic.index(from_ms)
        lo = hi - LEAD_IN_MS // FRAME_MS
        match, _, _ = self._compare(max(lo, 0), hi, max(self._mic.index(end_ms) - hi, 0),
                                    gain=gain, chance_unaligned=True)
        return None if match.correlation == 0.0 else match

    def _search(self, stretch: Stretch, near_ms: int | None = None,
                longest_ms: int | None = None) -> tuple[float, int, np.ndarray]:
        """The best lag of `stretch`'s first `count` frames (over `LAG_RANGE_MS`, or within
        `LAG_DRIFT_MS` of `near_ms`; none longer than `longest_ms`), dry and with the
        reverberant tail (the dry reference first; the tail only when it fell short of
        `ECHO_CORRELATION`): (correlation, lag ms,
        the reference's levels, dry or with the tail as matched, at that lag for all the
        stretch's frames, extra ones included)."""
        count = stretch.count
        mic = comparable_levels(stretch.mic[:count], stretch.floor)
        top = stretch.mic[:count].max(axis=0)
        best = (0.0, 0, stretch.block[:len(stretch.mic)])
        first, last = 0, stretch.max_lag - LAG_RANGE_MS[0] // FRAME_MS
        if near_ms is not None:
            first = max(stretch.max_lag - (near_ms + LAG_DRIFT_MS) // FRAME_MS, first)
            last = min(stretch.max_lag - (near_ms - LAG_DRIFT_MS) // FRAME_MS, last)
        if longest_ms is not None:
            first = max(stretch.max_lag - longest_ms // FRAME_MS, first)
        for reverb in (False, True):
            if reverb and best[0] >= ECHO_CORRELATION:
                break  # the dry reference sufficed
            candidate = reverberant(stretch.block) if reverb else stretch.block
            correlation, lag_ms = best_lag(candidate[first:last + count], mic, top,
                                           stretch.floor, stretch.max_lag - first)
            if correlation > best[0]:
                aligned = aligned_at(candidate, len(stretch.mic), stretch.max_lag, lag_ms)
                best = (correlation, lag_ms, aligned)
        return best

    def _compare(self, lo: int, hi: int, extra: int, gain_frames: int | None = None,
                 gain: np.ndarray | None = None, played_only: bool = False,
                 chance_unaligned: bool = False, longest_ms: int | None = None,
                 ) -> tuple[EchoMatch, np.ndarray, np.ndarray]:
        """`match` over the kept frames [lo, hi) (indices into the kept levels), with
        `excess_db` for those and the `extra` frames after them, at the lag found on [lo, hi)
        and `gain` (dB per band), or the echo gain found on the first `gain_frames` (None: all):
        the lead-in before a candidate, which a person talking over the echo has not reached
        yet; at a lag past `SILENT_LEAD_LAG_MS`, on the frames where the reply sounded only.
        `played_only`: as `MicTimeline.stretch`. `longest_ms`: the longest lag searched (ms;
        None: `LAG_RANGE_MS`'s). `chance_unaligned`: when [lo, hi)
        correlates below `WEAK_ECHO_CORRELATION` its best lag is chance (no echo was found
        there), and the excess is taken, as with a held path that heard no echo, over the
        reverberant reference each frame the loudest over the whole lag range. Returns the
        match, the echo gain used and the reference levels at the best lag (or unaligned) for
        the frames compared and the extra ones (dB, no gain; empty when nothing could be
        compared)."""
        stretch = self._mic.stretch(lo, hi, extra, played_only)
        nothing = np.full(len(BAND_EDGES_HZ) - 1, -np.inf)
        if stretch is None:
            return EchoMatch(0.0, 0), nothing, np.zeros((0, len(nothing)))
        correlation, lag_ms, aligned = self._search(stretch, longest_ms=longest_ms)
        if chance_unaligned and correlation < WEAK_ECHO_CORRELATION:
            aligned = aligned_at(reverberant(stretch.block), len(stretch.mic), stretch.max_lag,
                                 None)
        raw = stretch.mic
        if gain is None:
            known = stretch.count if gain_frames is None else gain_frames
            gain, _, _ = echo_gain(raw[:known], aligned[:known], stretch.floor,
                                   sounding_only=lag_ms > SILENT_LEAD_LAG_MS)
            if gain_frames is not None:
                gain = self._remember_gain(gain)
        return EchoMatch(correlation, lag_ms, excess_db(raw, aligned, gain, stretch.floor),
                         stretch.first_ms), gain, aligned

    def echo_levels(self, start_ms: int, end_ms: int) -> tuple[np.ndarray, np.ndarray, int] | None:
        """The microphone's band levels from `start_ms` to `end_ms` (ms on this stream) and
        the echo's levels predicted there, for echo suppression
        (`server.listening.echo_suppression`): (microphone, echo, first_ms), both (frames,
        bands) in dB (echo -inf: none), frame i ending at first_ms + 10 i + 10 ms.

        The echo is the reference at the lag and gain of the `LEAD_IN_MS` before `start_ms`
        (a turn's audio starts at the person's voice onset: before it the microphone held the
        echo and the noise only), mapped on as it played (`MicTimeline.playing_frames`: silent where
        the position stood still, as in a pause), silent after the latest position fed
        (`_compare`'s `played_only`), each frame the loudest
        within `EXCESS_SLACK_FRAMES`. None when that lead-in is not clearly echo (it
        correlates below `ECHO_CORRELATION` with the reply: a room's noise floor alone, with
        no echo, could reach `WEAK_ECHO_CORRELATION`), or nothing could be compared (no reply,
        too few tagged frames, not kept any more: `TURN_HISTORY_MS`)."""
        hi = self._mic.index(start_ms)
        lo = hi - LEAD_IN_MS // FRAME_MS
        extra = self._mic.index(end_ms) - hi
        if lo < 0 or extra <= 0:
            return None
        match, gain, aligned = self._compare(lo, hi, extra, gain_frames=hi - lo,
                                             played_only=True)
        if match.correlation < ECHO_CORRELATION:
            return None
        count = len(aligned) - (hi - lo)
        mic = self._mic.levels[hi:hi + count]
        return mic, echo_db(aligned, gain)[hi - lo:], (self._mic.first + hi) * FRAME_MS

    def _remember_gain(self, gain: np.ndarray) -> np.ndarray:
        """The echo gain of a lead-in (dB per band), with the last one measured in an earlier
        lead-in for each band where this one heard no echo (-inf): the echo path's gain holds
        while the reply plays, but the lead-in may fall where playback stalled (the client's
        jitter buffer ran dry: the echo has a silence the reference does not). Measured over
        loopback on a loaded machine: such a lead-in left the gain unknown, every frame of the
        echo after it counted as unexplained, and the echo started a turn."""
        known = np.isfinite(gain)
        self._gain = np.where(known, gain, self._gain)
        return np.where(known, gain, self._gain)


def _onset_run_start(excess: np.ndarray, thresholds: tuple[float, ...]) -> int | None:
    """Where `EchoDetector.voice_onset_ms`'s run begins in `excess` (dB per 10 ms frame over
    the echo and the noise): the first run of `ONSET_RUN_FRAMES` frames reaching the first
    of `thresholds` (dB) that has one; else `CUT_RUN_FRAMES` frames at the end of `excess`,
    cut off by the end of the audio, that reach `EXCESS_DB` (a voice's first 20-30 ms rise
    through it: offline, with no path held, Piper "What was the name of that street?" at -12 dBFS
    had 7.9, 10.6 and 8.3, 11.0 dB 40 ms after its onset, and the stretch before it 0-1.5 dB);
    None when neither is there."""
    for threshold in thresholds:
        found = run_starts(excess >= threshold, ONSET_RUN_FRAMES)
        if found.size:
            return int(found[0])
    if excess.size >= CUT_RUN_FRAMES and bool((excess[-CUT_RUN_FRAMES:] >= EXCESS_DB).all()):
        return excess.size - CUT_RUN_FRAMES
    return None
