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
and all (`EchoDetector._playing_frames`).

- `server.listening.band_envelope.BandEnvelope` turns a stream of samples (any rate) into
  such frames, and `EchoReference` holds the envelope of one reply's audio, indexed by its
  position in the reply (ms), recorded by the I/O layer as the audio is queued for sending.
- `EchoDetector` keeps the microphone's envelope at 16 kHz, each frame tagged with the reply
  position the session estimated was playing when it arrived, learns the echo path from
  stretches the reply alone explains and holds it (`server.listening.echo_path`), and answers
  `is_echo` and `voice_onset_ms` against it.

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

from dataclasses import dataclass, field

import numpy as np

from server.listening.band_envelope import (
    BAND_EDGES_HZ,
    FRAME_MS,
    SILENCE_DB,
    BandEnvelope,
    EchoReference,
)
from server.listening.echo_path import (
    AGC_RISE_DB,
    ECHO_CORRELATION,
    EXCESS_DB,
    EXCESS_SLACK_FRAMES,
    FOLLOWED_CORRELATION,
    LAG_DRIFT_MS,
    LEARN_GUARD_MS,
    LEARN_STEP_MS,
    LEARN_WINDOW_MS,
    NOISE_MARGIN_DB,
    UNEXPLAINED_SHARE,
    EchoPath,
    aligned_at,
    best_lag,
    comparable_levels,
    echo_db,
    echo_gain,
    excess_db,
    learn_path,
    reverberant,
)

__all__ = ["BAND_EDGES_HZ", "ECHO_CORRELATION", "FRAME_MS", "BandEnvelope", "EchoDetector",
           "EchoMatch", "EchoReference"]

LAG_RANGE_MS = (-200, 800)
"""Delays searched (ms) of the microphone behind the moment its audio was estimated to play (by
the position the session estimated for each append's capture): the estimate
(`ReplyPlayback.position_ms`) misses the client's output and capture latency, the network
(the ACK's age and the append's) and the room, so the microphone is normally behind it; ahead
of it by up to 200 ms when an ACK was late."""



ECHO_TAIL_MS = LAG_RANGE_MS[1]
"""How long after a reply stopped playing (its last ACK) the microphone may still hear it (ms):
the longest lag searched."""

LEAD_IN_MS = 300
"""Microphone audio before a candidate's start that is compared too (ms). Measured (as for
`ECHO_CORRELATION`, with the earlier 10 ms rectangular frames): with 100 ms the worst echo
stretch correlated 0.893 instead of 0.907, and a person over the echo was accepted no sooner."""

MAX_SPAN_MS = 1000
"""Longest stretch of microphone audio compared (ms), ending at the decision."""

MIN_FRAMES = 20
"""Fewer tagged frames than this (200 ms) are never called echo."""

MIC_RATE_HZ = 16_000
"""Rate of the microphone stream `EchoDetector` takes (the VAD's)."""

NOISE_HISTORY_MS = 4000
"""Microphone levels kept for the noise floor estimate (ms): long enough that speech, even
dense speech, leaves pauses and closures in it."""

NOISE_PERCENTILE = 5.0
"""The microphone's noise floor in each band: this percentile of its levels over
`NOISE_HISTORY_MS` (a minimum-statistics estimate, after R. Martin, "Noise power spectral
density estimation based on optimal smoothing and minimum statistics", IEEE Trans. Speech and
Audio Processing 9(5), 2001, without the bias compensation: the margin below covers it)."""

NOISE_MIN_MS = 250
"""Least microphone audio (ms) the noise floor is estimated from; before it, `SILENCE_DB`. The
page streams its microphone from the session's start and a first reply may play within
250 ms: its echo's first words are judged before a second was heard. Measured (a -30 dB Piper
echo 150-400 ms late, over -60 / -50 dBFS RMS pink noise, microphone from the reply's start):
while the floor waited for a full second, the echo correlated 0.52-0.89 there (0.99-1.0 after
it), and over the protocol it started a turn in 1 of 12 runs on a loaded machine (CI)."""

WEAK_ECHO_CORRELATION = 0.38
"""A stretch correlating at least this well with the reply is echo when nothing in it is
unexplained (`EchoDetector.is_echo`). Measured (tests/echo_room.py rooms, offline): a -30 dB
echo only 5 dB over a -50 dBFS RMS pink noise floor correlated 0.69-0.92 with zero excess; a
person over it, 0.45-0.53 with 40-80 % of the frames 6 dB and more above the echo (the share
rejects them, not the correlation). An echo whose stretch spans a playback stall (the page's
jitter buffer ran dry: a silence in the echo the reference did not have, when the microphone
was mapped to the reply by one offset) correlated 0.40 with 8 % unexplained and started a turn
at 0.5 (since then the reference follows the stall, `EchoDetector._playing_frames`). At 0.35 a
person over a Piper echo in the page (tests/test_browser_microphone.py) was held back as echo
in 2 of 3 runs; 0.38 passed both tests (echo rooms 35 of 35, that browser test 3 of 3)."""

ONSET_EXCESS_DB = 10.0
"""Excess (dB) that marks a voice onset, higher than `EXCESS_DB`: the echo's gain measured
before the candidate (`EchoDetector.voice_onset_ms`) may be a few dB off later on (measured
over loopback: echo-only frames up to 9 dB, a person at -12 dBFS peak 11-30 dB)."""

ONSET_RUN_FRAMES = 3
"""Consecutive frames above `ONSET_EXCESS_DB` that mark a voice onset (30 ms)."""

ONSET_EDGE_DB = 1.5
"""The frames right before such a run whose excess rises toward it, from at least this (dB),
still belong to the voice: its rising edge, e.g. the breath of an "h"."""

SHARE_SPAN_MS = 250
"""The unexplained share is taken over at least this much audio (ms) before the decision: a
share needs frames. Server VAD asks about a candidate on every window (32 ms) once it held
one back as echo; over so few frames one stray frame above the echo made a share of 10-33 %, and
three such windows in a row let the echo start a turn (bench_echo, loaded machine). A person
over the echo keeps 40-80 % of the frames above it over any 250 ms of their speech."""

STALL_FRAMES = 5
"""Frames (50 ms) a reply position must stand still for the loudspeaker to count as silent
(`EchoDetector._playing_frames`): a client that played all it had waits for more, and a paused
reply stops, while the session's estimate stays at the audio sent (the pause's position). The
estimate's own jitter holds a position for shorter: its corrections (an ACK, an append arriving
late) are tens of ms, and the echo detector's offline tests move it +-20 ms per append."""

TURN_HISTORY_MS = 15_000
"""Microphone levels kept (ms) for `EchoDetector.echo_levels`, which a turn's echo suppression
asks for when the turn is committed: its start (where the echo overlaps the first words) and
the lead-in before it must still be there. A turn committed later than this after its start
is transcribed without echo suppression. Costs 12 KB per second kept (five float64 levels and
one tag per 10 ms frame)."""

_KEEP_MS = max(MAX_SPAN_MS + LEAD_IN_MS + 1000, NOISE_HISTORY_MS, TURN_HISTORY_MS + LEAD_IN_MS)


@dataclass(frozen=True, slots=True, eq=False)
class EchoMatch:
    """The best match of a microphone stretch with the reply.

    Attributes:
        correlation: normalized correlation in [-1, 1] (0.0 when nothing could be compared).
        lag_ms: how long after its audio was estimated to play the microphone heard it, at
            that correlation (ms, within `LAG_RANGE_MS`; 0 when nothing could be compared).
        excess_db: per compared frame, how far the microphone rose above the echo (the
            reference at that lag, at the gain the echo has in the lead-in) plus the noise
            floor (dB, >= 0): what someone else in the room added (`echo_path.excess_db`).
        first_ms: stream position (ms) where the first compared frame's step begins; frame i
            covers [first_ms + 10 i, first_ms + 10 i + 10).
    """

    correlation: float
    lag_ms: int
    excess_db: np.ndarray = field(default_factory=lambda: np.zeros(0))
    first_ms: int = 0

    def unexplained_share(self, from_ms: int) -> float:
        """Share of the compared frames from `from_ms` on whose `excess_db` reaches
        `EXCESS_DB` (0.0 when there are none)."""
        excess = self.excess_db[max(0, (from_ms - self.first_ms) // FRAME_MS):]
        return float(np.mean(excess >= EXCESS_DB)) if excess.size else 0.0


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
        self._envelope = BandEnvelope(MIC_RATE_HZ)
        self._levels = np.zeros((0, len(BAND_EDGES_HZ) - 1))
        self._offsets = np.zeros(0)
        self._first = 0
        self._received = 0
        self._reference: EchoReference | None = None
        self._played_ms = -np.inf
        self._gain = np.full(len(BAND_EDGES_HZ) - 1, -np.inf)
        self.path: EchoPath | None = None
        """The held echo path (None: no stretch of the stream taught one yet)."""
        self._next_window_end = LEARN_WINDOW_MS // FRAME_MS

    def feed(self, pcm_16k: np.ndarray, playback_ms: int | None,
             reference: EchoReference | None) -> None:
        """Append microphone samples (1-D float at 16 kHz).

        Args:
            pcm_16k: the new samples.
            playback_ms: reply position (ms) playing when the last of these samples arrived,
                or None when no reply plays; earlier samples map to earlier positions.
            reference: the envelope of that reply (None: nothing to compare with; these
                frames are untagged, the earlier ones stay comparable with the previous
                reference: a stretch reaching back into the echo's tail is still judged).
                Frames fed with another reference before are forgotten as comparable.
        """
        samples = np.asarray(pcm_16k, dtype=np.float32).reshape(-1)
        if reference is not None and reference is not self._reference:
            self._offsets[:] = np.nan
            self._reference = reference
            self._played_ms = -np.inf
        if reference is not None and playback_ms is not None:
            self._played_ms = max(self._played_ms, playback_ms)
        end_ms = (self._received + samples.size) * 1000 / MIC_RATE_HZ
        self._received += samples.size
        rows = self._envelope.feed(samples)
        count = len(rows)
        if count == 0:
            return
        offset = np.nan if playback_ms is None or reference is None else playback_ms - end_ms
        self._levels = np.concatenate((self._levels, rows))
        self._offsets = np.concatenate((self._offsets, np.full(count, offset)))
        excess = len(self._levels) - _KEEP_MS // FRAME_MS
        if excess > 0:
            self._levels = self._levels[excess:]
            self._offsets = self._offsets[excess:]
            self._first += excess

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
        last = min(until_ms // FRAME_MS, self._first + len(self._levels))
        end = max(end, self._first + span + (step - (self._first + span) % step) % step)
        while end <= last:
            hi = end - self._first
            stretch = self._stretch(hi - span, hi, 0)
            if stretch is not None:
                correlation, lag_ms, aligned = self._search(stretch)
                tail = aligned_at(reverberant(stretch.block), stretch.count,
                                  stretch.max_lag, lag_ms)
                learned = learn_path(self.path, stretch.mic, aligned, tail, stretch.floor,
                                     correlation, lag_ms)
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
        the lead-in's gain) below `UNEXPLAINED_SHARE`. False when nothing could be compared."""
        share_from_ms = min(start_ms, end_ms - SHARE_SPAN_MS)
        if self.learn(start_ms - LEARN_GUARD_MS) is None:
            match = self.match(start_ms, end_ms)
            if match.correlation >= ECHO_CORRELATION:
                return True
            return (match.correlation >= WEAK_ECHO_CORRELATION
                    and match.unexplained_share(share_from_ms) < UNEXPLAINED_SHARE)
        held = self.held_excess(share_from_ms, end_ms)
        if held is None:
            return False
        if held.unexplained_share(share_from_ms) < UNEXPLAINED_SHARE:
            return True
        return self._searched_echo(start_ms, end_ms, share_from_ms)

    def held_excess(self, from_ms: int, end_ms: int) -> EchoMatch | None:
        """The excess of the microphone from `from_ms` to `end_ms` over the held echo path (the
        reference with its reverberant tail at the path's lag, or the loudest over the lag
        range when the lag is unknown; at the path's gain) plus the noise floor, as an
        `EchoMatch` (correlation 0.0, the path's lag); None without a path, or with fewer than
        `MIN_FRAMES` tagged frames there."""
        path = self.path
        if path is None:
            return None
        lo, hi = from_ms // FRAME_MS - self._first, end_ms // FRAME_MS - self._first
        stretch = self._stretch(lo, hi, 0)
        if stretch is None:
            return None
        aligned = aligned_at(reverberant(stretch.block), stretch.count, stretch.max_lag,
                             path.lag_ms)
        excess = excess_db(stretch.mic, aligned, path.gain_db, stretch.floor)
        return EchoMatch(0.0, path.lag_ms or 0, excess, (self._first + stretch.lo) * FRAME_MS)

    def _searched_echo(self, start_ms: int, end_ms: int, share_from_ms: int) -> bool:
        """The candidate is the echo at the lag it matches best now within `LAG_DRIFT_MS` of
        the held lag (the playing position's estimate drifts by 100 ms within a reply while a
        client waits for audio without ACKs): over `LEAD_IN_MS` before `start_ms` to `end_ms`
        (at most `MAX_SPAN_MS`), at that lag (`_search`), less than `UNEXPLAINED_SHARE` of the
        frames from `share_from_ms` are `EXCESS_DB` above the reverberant reference at the held
        gain plus the noise; or, if that lag correlates at least `ECHO_CORRELATION`, at the
        stretch's own gain (`echo_gain`) when it rose at most `AGC_RISE_DB` over the held gain
        in every band where both are known (an AGC lifted the echo); or it follows the reply
        within `LAG_DRIFT_MS` of the held lag as closely as `FOLLOWED_CORRELATION`. Never
        without a held lag: with no echo heard, no correlation makes speech the echo.
        (Over the whole lag range a person at -6 dBFS over a 0 dB echo lined up with a reply
        word 680 ms off the held lag and was taken for it; with the dry reference, a -10 dB
        echo in a 400 ms RT60 room started a turn.)"""
        path = self.path
        if path is None or path.lag_ms is None:
            return False
        lo = max(start_ms - LEAD_IN_MS, end_ms - MAX_SPAN_MS, 0) // FRAME_MS - self._first
        stretch = self._stretch(lo, end_ms // FRAME_MS - self._first, 0)
        if stretch is None:
            return False
        correlation, lag_ms, _ = self._search(stretch, path.lag_ms)
        aligned = aligned_at(reverberant(stretch.block), stretch.count, stretch.max_lag, lag_ms)
        first_ms = (self._first + stretch.lo) * FRAME_MS

        def explained(gain: np.ndarray) -> bool:
            excess = excess_db(stretch.mic, aligned, gain, stretch.floor)
            match = EchoMatch(correlation, lag_ms, excess, first_ms)
            return match.unexplained_share(share_from_ms) < UNEXPLAINED_SHARE

        if explained(path.gain_db):
            return True
        if correlation < ECHO_CORRELATION:
            return False
        if correlation >= FOLLOWED_CORRELATION:
            return True
        gain, _, _ = echo_gain(stretch.mic, aligned, stretch.floor)
        both = np.isfinite(gain) & np.isfinite(path.gain_db)
        return not np.any(gain[both] - path.gain_db[both] > AGC_RISE_DB) and explained(gain)

    def match(self, start_ms: int, end_ms: int) -> EchoMatch:
        """Best normalized correlation between the microphone from `start_ms` - `LEAD_IN_MS`
        (at most `MAX_SPAN_MS` back) to `end_ms` and the reference, over `LAG_RANGE_MS`, with
        `excess_db` at the best lag and the echo gain of the lead-in (the part before
        `start_ms`, when it holds at least `MIN_FRAMES` / 2 frames; else of the whole stretch).

        For each lag, each microphone frame is compared with the reference frame that was
        playing that long before it (`_playing_frames`, stalls and all), dry and with a
        reverberant tail (`REVERB_DECAY_DB_PER_FRAME`). Both stretches get the
        `DYNAMIC_RANGE_DB` floor and the noise floor (`noise_floor` + `NOISE_MARGIN_DB`, for
        the reference at the level the echo has: its loudest frame per band mapped to the
        microphone's) and lose each band's mean; the correlation is the sum of their products
        over the root of the products of their sums of squares (Pearson's r over all bands and
        frames with per-band means). Correlation 0.0 when fewer than `MIN_FRAMES` frames are
        tagged, or either stretch is constant.
        """
        lo = max(start_ms - LEAD_IN_MS, end_ms - MAX_SPAN_MS, 0) // FRAME_MS - self._first
        lead = start_ms // FRAME_MS - self._first - max(lo, 0)
        return self._compare(lo, end_ms // FRAME_MS - self._first, 0,
                             lead if lead >= MIN_FRAMES // 2 else None)[0]

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
        50 ms into a soft "No." found no 10 dB run and started 500 ms early, on the echo),
        moved back over the frames right before it whose excess rises toward it from
        `ONSET_EDGE_DB` (a soft onset). None when
        nothing could be compared (no reply, too few tagged frames) or no such run exists:
        nothing tells the person from the echo."""
        thresholds: tuple[float, ...] = (ONSET_EXCESS_DB,)
        if self.learn(from_ms - LEARN_GUARD_MS) is not None:
            match = self.held_excess(from_ms, end_ms)
            thresholds += (EXCESS_DB,)
        else:
            match = self._lead_in_excess(from_ms, end_ms, echo_until_ms)
        if match is None or match.excess_db.size < ONSET_RUN_FRAMES:
            return None
        first = max(0, (from_ms - match.first_ms) // FRAME_MS)
        for threshold in thresholds:
            loud = match.excess_db[first:] >= threshold
            if loud.size < ONSET_RUN_FRAMES:
                return None
            runs = np.lib.stride_tricks.sliding_window_view(loud, ONSET_RUN_FRAMES).all(axis=1)
            found = np.flatnonzero(runs)
            if found.size:
                break
        else:
            return None
        index = first + int(found[0])
        excess = match.excess_db
        while index > first and ONSET_EDGE_DB <= excess[index - 1] < excess[index]:
            index -= 1
        return match.first_ms + index * FRAME_MS

    def _lead_in_excess(self, from_ms: int, end_ms: int,
                        echo_until_ms: int | None) -> EchoMatch | None:
        """`voice_onset_ms`'s excess with no path held: the echo at the lag of the
        `LEAD_IN_MS` before `from_ms` and the gain of the lead-in before `echo_until_ms` (when
        given and earlier) or before `from_ms`; None when nothing could be compared."""
        gain = None
        if echo_until_ms is not None and echo_until_ms < from_ms:
            clean_hi = echo_until_ms // FRAME_MS - self._first
            clean, clean_gain, _ = self._compare(clean_hi - LEAD_IN_MS // FRAME_MS, clean_hi,
                                                 0)
            if clean.correlation > 0.0:
                gain = clean_gain
        hi = from_ms // FRAME_MS - self._first
        lo = hi - LEAD_IN_MS // FRAME_MS
        match, _, _ = self._compare(max(lo, 0), hi,
                                    max(end_ms // FRAME_MS - self._first - hi, 0), gain=gain)
        return None if match.correlation == 0.0 else match

    def _stretch(self, lo: int, hi: int, extra: int, played_only: bool = False,
                 ) -> _Stretch | None:
        """The kept frames [lo, hi) and the `extra` frames after them, with the reference
        played for every lag of `LAG_RANGE_MS` (`_Stretch`); None when fewer than `MIN_FRAMES`
        of [lo, hi) are kept and tagged. With `played_only`, the reply after the latest
        position fed (plus `EXCESS_SLACK_FRAMES`) reads as silence: it was sent but not played
        (a paused reply)."""
        reference = self._reference
        lo, hi = max(lo, 0), min(hi, len(self._levels))
        if reference is None or hi - lo < MIN_FRAMES:
            return None
        offsets = self._offsets[lo:hi]
        if int(np.count_nonzero(~np.isnan(offsets))) < MIN_FRAMES:
            return None
        extra = max(min(extra, len(self._levels) - hi), 0)
        min_lag, max_lag = (lag // FRAME_MS for lag in LAG_RANGE_MS)
        playing = self._playing_frames(lo - max_lag, hi + extra - min_lag)
        if played_only:
            played = int(self._played_ms // FRAME_MS) + EXCESS_SLACK_FRAMES
            playing[playing > played] = -1
        return _Stretch(lo, hi - lo, max_lag, self._levels[lo:hi + extra],
                        reference.rows(playing), self.noise_floor() + NOISE_MARGIN_DB)

    def _search(self, stretch: _Stretch, near_ms: int | None = None,
                ) -> tuple[float, int, np.ndarray]:
        """The best lag of `stretch`'s first `count` frames (over `LAG_RANGE_MS`, or within
        `LAG_DRIFT_MS` of `near_ms`), dry and with the reverberant tail (the dry reference
        first; the tail only when it fell short of `ECHO_CORRELATION`): (correlation, lag ms,
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
                 ) -> tuple[EchoMatch, np.ndarray, np.ndarray]:
        """`match` over the kept frames [lo, hi) (indices into the kept levels), with
        `excess_db` for those and the `extra` frames after them, at the lag found on [lo, hi)
        and `gain` (dB per band), or the echo gain found on the first `gain_frames` (None: all):
        the lead-in before a candidate, which a person talking over the echo has not reached
        yet. `played_only`: as `_stretch`. Returns the match, the echo gain used and the
        reference levels at the best lag for the frames compared and the extra ones (dB, no
        gain; empty when nothing could be compared)."""
        stretch = self._stretch(lo, hi, extra, played_only)
        nothing = np.full(len(BAND_EDGES_HZ) - 1, -np.inf)
        if stretch is None:
            return EchoMatch(0.0, 0), nothing, np.zeros((0, len(nothing)))
        correlation, lag_ms, aligned = self._search(stretch)
        raw = stretch.mic
        if gain is None:
            known = stretch.count if gain_frames is None else gain_frames
            gain, _, _ = echo_gain(raw[:known], aligned[:known], stretch.floor)
            if gain_frames is not None:
                gain = self._remember_gain(gain)
        return EchoMatch(correlation, lag_ms, excess_db(raw, aligned, gain, stretch.floor),
                         (self._first + stretch.lo) * FRAME_MS), gain, aligned

    def _playing_frames(self, start: int, stop: int) -> np.ndarray:
        """The reference frame the loudspeaker played while each kept frame start .. stop - 1
        was captured (indices may reach outside the kept frames), -1 where it played nothing.

        From the frames' tags (reply position minus stream time), linearly interpolated over
        untagged frames and carried on at real time beyond the first and last tagged ones.
        Playback never runs faster than real time, so the true offset (position minus time)
        never grows: each frame takes the largest offset tagged from it on (a later ACK that
        found the client further on than estimated moves the frames before it on too; with
        ACKs every 500 ms, the estimate before the first one was 140 ms behind the client's
        start and the echo there started a turn). Nor does playback go back: the positions
        are a running maximum (which also undoes the real-time assumption within an append
        whose position stood still). A position held for `STALL_FRAMES` or longer is a
        loudspeaker fallen silent (the client played all it had and waits for more, or the
        reply is paused)."""
        offsets = self._offsets
        tagged = np.flatnonzero(~np.isnan(offsets))
        frames = np.arange(min(start, 0), max(stop, len(offsets)))
        filled = np.interp(frames, tagged, offsets[tagged])
        latest = np.maximum.accumulate(filled[::-1])[::-1]
        positions = frames + self._first + latest / FRAME_MS
        playing = np.maximum.accumulate(np.round(positions).astype(np.int64))
        playing[STALL_FRAMES:][playing[STALL_FRAMES:] == playing[:-STALL_FRAMES]] = -1
        return playing[start - frames[0]:stop - frames[0]]

    def echo_levels(self, start_ms: int, end_ms: int) -> tuple[np.ndarray, np.ndarray, int] | None:
        """The microphone's band levels from `start_ms` to `end_ms` (ms on this stream) and
        the echo's levels predicted there, for echo suppression
        (`server.listening.echo_suppression`): (microphone, echo, first_ms), both (frames,
        bands) in dB (echo -inf: none), frame i ending at first_ms + 10 i + 10 ms.

        The echo is the reference at the lag and gain of the `LEAD_IN_MS` before `start_ms`
        (a turn's audio starts at the person's voice onset: before it the microphone held the
        echo and the noise only), mapped on as it played (`_playing_frames`: silent where
        the position stood still, as in a pause), silent after the latest position fed
        (`_compare`'s `played_only`), each frame the loudest
        within `EXCESS_SLACK_FRAMES`. None when that lead-in is not clearly echo (it
        correlates below `ECHO_CORRELATION` with the reply: a room's noise floor alone, with
        no echo, could reach `WEAK_ECHO_CORRELATION`), or nothing could be compared (no reply,
        too few tagged frames, not kept any more: `TURN_HISTORY_MS`)."""
        hi = start_ms // FRAME_MS - self._first
        lo = hi - LEAD_IN_MS // FRAME_MS
        extra = end_ms // FRAME_MS - self._first - hi
        if lo < 0 or extra <= 0:
            return None
        match, gain, aligned = self._compare(lo, hi, extra, gain_frames=hi - lo,
                                             played_only=True)
        if match.correlation < ECHO_CORRELATION:
            return None
        count = len(aligned) - (hi - lo)
        mic = self._levels[hi:hi + count]
        return mic, echo_db(aligned, gain)[hi - lo:], (self._first + hi) * FRAME_MS

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

    def noise_floor(self) -> np.ndarray:
        """The microphone's noise floor per band (dB): the `NOISE_PERCENTILE` percentile of
        the levels of the last `NOISE_HISTORY_MS`; `SILENCE_DB` before `NOISE_MIN_MS` was
        heard."""
        recent = self._levels[-(NOISE_HISTORY_MS // FRAME_MS):]
        if len(recent) < NOISE_MIN_MS // FRAME_MS:
            return np.full(len(BAND_EDGES_HZ) - 1, SILENCE_DB)
        return np.percentile(recent, NOISE_PERCENTILE, axis=0)


@dataclass(frozen=True, slots=True, eq=False)
class _Stretch:
    """Microphone frames and the reference played for every lag (`EchoDetector._stretch`).

    Attributes:
        lo: index of the first frame in the kept levels.
        count: frames compared (the rest of `mic` are extra frames judged at the same lag).
        max_lag: the lag (frames) of `block`'s window 0: window i is at lag max_lag - i.
        mic: the microphone's levels (count + extra, bands; dB).
        block: the reference's levels as played, for every lag (count + extra + lags - 1,
            bands; dB).
        floor: the noise floor plus `NOISE_MARGIN_DB` per band (dB).
    """

    lo: int
    count: int
    max_lag: int
    mic: np.ndarray
    block: np.ndarray
    floor: np.ndarray

