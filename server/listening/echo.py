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

- `BandEnvelope` turns a stream of samples (any rate) into such frames.
- `EchoReference` holds the envelope of one reply's audio, indexed by its position in the
  reply (ms), recorded by the I/O layer as the audio is queued for sending.
- `EchoDetector` keeps the microphone's envelope at 16 kHz, each frame tagged with the reply
  position the session estimated was playing when it arrived, and answers `is_echo` and
  `voice_onset_ms`.

A room adds two things the reply does not hold. Its noise floor: band levels near it are the
noise's random levels, not the echo's, so both envelopes are floored at the microphone's noise
floor (a minimum-statistics estimate) before they are compared. Its reverberation: the end of
every word, and of the reply, keeps sounding after the reply's audio fell silent, so the
reference is also compared with a decaying tail. And the level model behind the correlation
says what a person adds: the microphone's excess over the echo (reference plus the echo's gain)
plus the noise, per frame, which marks where someone else's voice begins.

Sans-I/O: plain objects and numpy. Constants and the measurements behind them are with each.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

FRAME_MS = 10
"""Envelope frame step (ms)."""

ANALYSIS_MS = 30
"""Samples analysed for one envelope frame (ms, Hann window): longer than the step and than a
pitch period, so that the levels do not depend on where a frame cuts the voice's periods.
Measured: with non-overlapping 10 ms frames, an echo 5 ms off the 10 ms lag grid correlated only
0.60 (0.99 on the grid)."""

BAND_EDGES_HZ = (100.0, 400.0, 1000.0, 2000.0, 4000.0, 7000.0)
"""Edges of the envelope bands (Hz): five bands over the speech range below the 8 kHz Nyquist
frequency of the 16 kHz microphone stream."""

SILENCE_DB = -120.0
"""Band level of digital silence (dB re full scale)."""

DYNAMIC_RANGE_DB = 50.0
"""Band levels more than this below the loudest one of an analysed stretch are raised to that
floor, so that the depth of silences (digital zero in the reply, a noise floor in the
microphone) does not count as a difference."""

LAG_RANGE_MS = (-200, 800)
"""Delays searched (ms) of the microphone behind the moment its audio was estimated to play (by
the position the session estimated for each append's capture): the estimate
(`Session.playback_position_ms`) misses the client's output and capture latency, the network
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

ECHO_CORRELATION = 0.8
"""A stretch whose best correlation with the reply reaches this is echo.

Measured through `server.listening.input_speech.InputSpeechDetector` (Silero + `TurnDetector`, 40 ms
appends at 24 kHz, playing position known to +-20 ms) on a 6 s Piper reply over a -65 dBFS
peak pink noise floor, every gate question counted: the reply's own echo, delayed 55, 155 and
405 ms (off the 10 ms grid), at -40..0 dBFS peak, with and without a simulated AGC (10 ms frames
pulled toward -25 dBFS RMS with a 300 ms time constant, up to +30 dB), correlated 0.882-1.0 and
never started a turn. A different sentence (Piper, espeak-ng en-us and en-us+f3) at -6 or -15
dBFS peak over that echo at about -25 dBFS peak: the correlation falls from 0.97-0.99 at the
onset to 0.5-0.8 within 100-250 ms; the turn started 180-474 ms after the onset (median 256;
with 0.85: median 234, same worst case; with 0.7 and 0.6 the worst cases grew past 1.1 s). An
echo at -50 dBFS peak without AGC, 15 dB over that noise floor, correlated down to 0.77 and
could start a turn: its band levels are then mostly the noise floor (since then compared above
the noise floor, `NOISE_MARGIN_DB`, with `WEAK_ECHO_CORRELATION` for what remains)."""

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

NOISE_MARGIN_DB = 6.0
"""Band levels less than this above the noise floor are raised to it, in the microphone and in
the reference mapped onto the microphone's level: what the noise masks is not compared. Without
it an echo 15 dB over a pink noise floor correlated 0.5-0.86 (its quiet frames are the noise's
random levels, the reference's are its own); with it 0.9 and above."""

REVERB_DECAY_DB_PER_FRAME = 60.0 * FRAME_MS / 500
"""Decay of the reverberant reference (dB per frame): a room with a 500 ms reverberation time
(RT60, the time sound takes to decay by 60 dB; living rooms and offices are 300-600 ms). The
reference is compared dry and with this tail (every level at least the previous frame's minus
the decay), and the better match counts: the room keeps the end of every word, and of the
reply, sounding after the reply's audio fell silent."""

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

EXCESS_DB = 6.0
"""A microphone frame this far above the echo plus the noise (band mean, dB) holds someone
else: measured, echo-only frames stayed under 0.5 dB, a person over the echo reached 6 dB within
20-40 ms of the onset and 10-18 dB later."""

ONSET_EXCESS_DB = 10.0
"""Excess (dB) that marks a voice onset, higher than `EXCESS_DB`: the echo's gain measured
before the candidate (`EchoDetector.voice_onset_ms`) may be a few dB off later on (measured
over loopback: echo-only frames up to 9 dB, a person at -12 dBFS peak 11-30 dB)."""

ONSET_RUN_FRAMES = 3
"""Consecutive frames above `ONSET_EXCESS_DB` that mark a voice onset (30 ms)."""

ONSET_EDGE_DB = 1.5
"""The frames right before such a run whose excess rises toward it, from at least this (dB),
still belong to the voice: its rising edge, e.g. the breath of an "h"."""

UNEXPLAINED_SHARE = 0.1
"""Share of a candidate's frames above `EXCESS_DB` that makes it more than echo."""

SHARE_SPAN_MS = 250
"""The unexplained share is taken over at least this much audio (ms) before the decision: a
share needs frames. Server VAD asks about a candidate on every window (32 ms) once it held
one back as echo; over so few frames one stray frame above the echo made a share of 10-33 %, and
three such windows in a row let the echo start a turn (bench_echo, loaded machine). A person
over the echo keeps 40-80 % of the frames above it over any 250 ms of their speech."""

EXCESS_SLACK_FRAMES = 5
"""The echo explains a microphone frame with its loudest level within this many frames
(50 ms): the position the session estimates is playing jitters with the ACKs and appends
(measured over loopback on a loaded machine: tags spread over 100-400 ms within a second)."""

STALL_FRAMES = 5
"""Frames (50 ms) a reply position must stand still for the loudspeaker to count as silent
(`EchoDetector._playing_frames`): a client that played all it had waits for more, and a paused
reply stops, while the session's estimate stays at the audio sent (the pause's position). The
estimate's own jitter holds a position for shorter: its corrections (an ACK, an append arriving
late) are tens of ms, and the echo detector's offline tests move it +-20 ms per append."""

EXCESS_GAIN_RANGE_DB = 20.0
"""Reference frames within this of the reference's loudest (per band) set the echo's gain."""

TURN_HISTORY_MS = 15_000
"""Microphone levels kept (ms) for `EchoDetector.echo_levels`, which a turn's echo suppression
asks for when the turn is committed: its start (where the echo overlaps the first words) and
the lead-in before it must still be there. A turn committed later than this after its start
is transcribed without echo suppression. Costs 12 KB per second kept (five float64 levels and
one tag per 10 ms frame)."""

_KEEP_MS = max(MAX_SPAN_MS + LEAD_IN_MS + 1000, NOISE_HISTORY_MS, TURN_HISTORY_MS + LEAD_IN_MS)


class BandEnvelope:
    """Streaming band envelope: samples at `rate_hz` in, (frames, bands) levels in dB out.

    Every `FRAME_MS` of input gives one row, from the `ANALYSIS_MS` of samples ending there
    (zeros before the first sample) under a Hann window: for each band [lo, hi) of
    `BAND_EDGES_HZ`, 10 log10 of the band's share of the windowed mean square (twice the power
    spectrum summed over the band's FFT bins, over the window length times the sum of the
    squared window: a full-scale sine in the band reads -3 dB, its RMS level), at least
    `SILENCE_DB`. Samples of an unfinished frame wait for the next call.

    Raises:
        ValueError: `rate_hz` gives a frame shorter than 20 samples (below 2 kHz).
    """

    def __init__(self, rate_hz: int) -> None:
        self.frame_samples = rate_hz * FRAME_MS // 1000
        if self.frame_samples < 20:
            raise ValueError("rate_hz must be at least 2000")
        self._window_samples = rate_hz * ANALYSIS_MS // 1000
        self._window = np.hanning(self._window_samples + 2)[1:-1]
        freqs = np.fft.rfftfreq(self._window_samples, 1.0 / rate_hz)
        self._band_bins = [(int(np.searchsorted(freqs, lo)), int(np.searchsorted(freqs, hi)))
                           for lo, hi in itertools.pairwise(BAND_EDGES_HZ)]
        self._scale = 2.0 / (self._window_samples * float(np.sum(self._window ** 2)))
        self._history = np.zeros(self._window_samples - self.frame_samples, dtype=np.float32)
        self._pending = np.zeros(0, dtype=np.float32)

    def feed(self, pcm: np.ndarray) -> np.ndarray:
        """Append 1-D float samples in [-1, 1]; return the (n, bands) levels of the newly
        completed frames (n may be 0)."""
        samples = np.asarray(pcm, dtype=np.float32).reshape(-1)
        buffer = np.concatenate((self._pending, samples)) if self._pending.size else samples
        count = buffer.size // self.frame_samples
        self._pending = buffer[count * self.frame_samples:].copy()
        if count == 0:
            return np.zeros((0, len(self._band_bins)))
        stream = np.concatenate((self._history, buffer[: count * self.frame_samples]))
        self._history = stream[stream.size - self._history.size:].copy()
        windows = np.lib.stride_tricks.sliding_window_view(
            stream, self._window_samples)[:: self.frame_samples]
        power = np.abs(np.fft.rfft(windows * self._window, axis=1)) ** 2
        # Band sums by slicing, not a matrix product: numpy's BLAS would keep its worker
        # threads spinning after every call (measured: +0.6 of a core at 25 sessions).
        bands = np.stack([power[:, lo:hi].sum(axis=1) for lo, hi in self._band_bins], axis=1)
        return np.maximum(10.0 * np.log10(np.maximum(bands * self._scale, 1e-30)), SILENCE_DB)


class EchoReference:
    """The band envelope of one reply's audio, by position in the reply.

    Append the reply's audio in order (`append`); frame i ends at reply position
    10 i + 10 ms (`BandEnvelope`). Positions outside what was appended read as silence.

    Args:
        rate_hz: sample rate of the reply audio (the session's output rate, 24000).
    """

    def __init__(self, rate_hz: int) -> None:
        self._envelope = BandEnvelope(rate_hz)
        self._frames: list[np.ndarray] = []
        self._count = 0
        self._levels = np.zeros((0, len(BAND_EDGES_HZ) - 1))

    def append(self, pcm: np.ndarray) -> None:
        """Add the next samples of the reply (1-D float in [-1, 1] at `rate_hz`)."""
        self.add_levels(self.envelope(pcm))

    def envelope(self, pcm: np.ndarray) -> np.ndarray:
        """The (frames, bands) levels of the reply's next samples (1-D float in [-1, 1] at
        `rate_hz`), for `add_levels`: the computing half of `append` (a few ms per second of
        audio), which may run on a worker thread. Call it in reply order, one call at a time;
        it touches only the streaming envelope, nothing `levels` or `add_levels` use."""
        return self._envelope.feed(pcm)

    def add_levels(self, rows: np.ndarray) -> None:
        """Add the levels `envelope` computed for the reply's next samples, in reply order."""
        if len(rows):
            self._frames.append(rows)
            self._count += len(rows)

    def levels(self, first: int, count: int) -> np.ndarray:
        """Levels (count, bands) of reference frames first .. first + count - 1; frames before
        0 or not appended yet are `SILENCE_DB`."""
        return self.rows(np.arange(first, first + count))

    def rows(self, indices: np.ndarray) -> np.ndarray:
        """Levels (len(indices), bands) of the reference frames at `indices` (1-D ints, any
        order, repeats allowed); frames before 0 or not appended yet are `SILENCE_DB`."""
        if len(self._levels) != self._count:
            self._levels = np.concatenate(self._frames) if self._frames else self._levels
            self._frames = [self._levels]
        out = np.full((len(indices), self._levels.shape[1]), SILENCE_DB)
        known = (indices >= 0) & (indices < self._count)
        out[known] = self._levels[indices[known]]
        return out


@dataclass(frozen=True, slots=True, eq=False)
class EchoMatch:
    """The best match of a microphone stretch with the reply.

    Attributes:
        correlation: normalized correlation in [-1, 1] (0.0 when nothing could be compared).
        lag_ms: how long after its audio was estimated to play the microphone heard it, at
            that correlation (ms, within `LAG_RANGE_MS`; 0 when nothing could be compared).
        excess_db: per compared frame, how far the microphone rose above the echo (the
            reference at that lag, at the gain the echo has in the lead-in) plus the noise
            floor (dB, >= 0): what someone else in the room added (`_excess_db`).
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
    """The microphone's band envelope with the playing reply position of every frame.

    Feed the 16 kHz microphone stream in order (`feed`), each piece with the reply position
    (ms) the session estimated was playing when it arrived and that reply's `EchoReference`;
    frame k ends at 10 k + 10 ms of the stream (`BandEnvelope`). `is_echo` then compares a
    stretch of the microphone with the reference.
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

    def match(self, start_ms: int, end_ms: int) -> EchoMatch:
        """Best normalized correlation between the microphone from `start_ms` - `LEAD_IN_MS`
        (at most `MAX_SPAN_MS` back) to `end_ms` and the reference, over `LAG_RANGE_MS`.

        For each lag, each microphone frame is compared with the reference frame that was
        playing that long before it (`_playing_frames`: from the frames' tags, the position
        the session estimated), dry and with a reverberant tail (`REVERB_DECAY_DB_PER_FRAME`).
        Before, one offset (the median of the stretch's tags) mapped the whole stretch: a
        stretch across a stall (the client waiting for synthesis that fell behind, or for
        the next ACK to let more audio out) could not be aligned on both sides, and its echo
        at -6 dB started turns (tests/test_echo.py, `paced_playback`). Both stretches get the
        `DYNAMIC_RANGE_DB` floor and the noise floor (`noise_floor` + `NOISE_MARGIN_DB`, for
        the reference at the level the echo has: its loudest frame per band mapped to the
        microphone's) and lose each band's mean; the correlation is the sum of their products
        over the root of the products of their sums of squares (Pearson's r over all bands and
        frames with per-band means). Correlation 0.0 when fewer than `MIN_FRAMES` frames are
        tagged, or either stretch is constant. `excess_db` is computed at the best lag.
        """
        lo = max(start_ms - LEAD_IN_MS, end_ms - MAX_SPAN_MS, 0) // FRAME_MS - self._first
        lead = start_ms // FRAME_MS - self._first - max(lo, 0)
        return self._compare(lo, end_ms // FRAME_MS - self._first, 0,
                             lead if lead >= MIN_FRAMES // 2 else None)[0]

    def voice_onset_ms(self, from_ms: int, end_ms: int,
                       echo_until_ms: int | None = None) -> int | None:
        """Where a sound the reply does not explain begins, searching from `from_ms` to
        `end_ms` (ms on this stream).

        The echo's lag is that of the `LEAD_IN_MS` before `from_ms` (the playing position
        drifts: the nearest echo aligns best), its gain that of the `LEAD_IN_MS` before
        `echo_until_ms` when given and earlier (audio known to be no person's: before the
        candidate's first speech window), else of the same lead-in. With them, the start of
        the first run of `ONSET_RUN_FRAMES` frames from `from_ms` whose excess over the echo
        and the noise (`EchoMatch.excess_db`) reaches `ONSET_EXCESS_DB`, moved back over the
        frames right before it whose excess rises toward it from `ONSET_EDGE_DB` (a soft
        onset). None when
        nothing could be compared (no reply, too few tagged frames) or no such run exists:
        nothing tells the person from the echo."""
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
        if match.correlation == 0.0 or match.excess_db.size == 0:
            return None
        first = max(0, (from_ms - match.first_ms) // FRAME_MS)
        loud = match.excess_db[first:] >= ONSET_EXCESS_DB
        if loud.size < ONSET_RUN_FRAMES:
            return None
        runs = np.lib.stride_tricks.sliding_window_view(loud, ONSET_RUN_FRAMES).all(axis=1)
        found = np.flatnonzero(runs)
        if found.size == 0:
            return None
        index = first + int(found[0])
        excess = match.excess_db
        while index > first and ONSET_EDGE_DB <= excess[index - 1] < excess[index]:
            index -= 1
        return match.first_ms + index * FRAME_MS

    def _compare(self, lo: int, hi: int, extra: int, gain_frames: int | None = None,
                 gain: np.ndarray | None = None, played_only: bool = False,
                 ) -> tuple[EchoMatch, np.ndarray, np.ndarray]:
        """`match` over the kept frames [lo, hi) (indices into the kept levels), with
        `excess_db` for those and the `extra` frames after them, at the lag found on [lo, hi)
        and `gain` (dB per band), or the echo gain found on the first `gain_frames` (None: all):
        the lead-in before a candidate, which a person talking over the echo has not reached
        yet. With `played_only`, the reply after the latest position fed (plus
        `EXCESS_SLACK_FRAMES`) reads as silence: it was sent but not played (a paused reply).
        Returns the match, the echo gain used and the reference levels at the best lag for
        the frames compared and the extra ones (dB, no gain; empty when nothing could be
        compared)."""
        reference = self._reference
        lo, hi = max(lo, 0), min(hi, len(self._levels))
        nothing = np.full(len(BAND_EDGES_HZ) - 1, -np.inf)
        if reference is None or hi - lo < MIN_FRAMES:
            return EchoMatch(0.0, 0), nothing, np.zeros((0, len(nothing)))
        offsets = self._offsets[lo:hi]
        tagged = offsets[~np.isnan(offsets)]
        if tagged.size < MIN_FRAMES:
            return EchoMatch(0.0, 0), nothing, np.zeros((0, len(nothing)))
        extra = min(extra, len(self._levels) - hi)
        min_lag, max_lag = (lag // FRAME_MS for lag in LAG_RANGE_MS)
        count = hi - lo
        playing = self._playing_frames(lo - max_lag, hi + extra - min_lag)
        if played_only:
            played = int(self._played_ms // FRAME_MS) + EXCESS_SLACK_FRAMES
            playing[playing > played] = -1
        block = reference.rows(playing)
        floor = self.noise_floor() + NOISE_MARGIN_DB
        raw = self._levels[lo:hi + extra]
        mic = raw[:count]
        mic = np.maximum(mic, np.maximum(floor, mic.max() - DYNAMIC_RANGE_DB))
        mic = mic - mic.mean(axis=0)
        best, aligned = EchoMatch(0.0, 0), block[:count + extra]
        for reverberant in (False, True):
            if reverberant and best.correlation >= ECHO_CORRELATION:
                break  # the dry reference sufficed
            candidate = _reverberant(block) if reverberant else block
            match = _best_lag(candidate[:count + max_lag - min_lag], mic,
                              raw[:count].max(axis=0), floor, max_lag)
            if match.correlation > best.correlation:
                best = match
                index = max_lag - match.lag_ms // FRAME_MS
                aligned = candidate[index:index + count + extra]
        if gain is None:
            known = count if gain_frames is None else gain_frames
            gain = _echo_gain(raw[:known], aligned[:known], floor)
            if gain_frames is not None:
                gain = self._remember_gain(gain)
        return EchoMatch(best.correlation, best.lag_ms, _excess_db(raw, aligned, gain, floor),
                         (self._first + lo) * FRAME_MS), gain, aligned

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
        return mic, _echo_db(aligned, gain)[hi - lo:], (self._first + hi) * FRAME_MS

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

    def is_echo(self, start_ms: int, end_ms: int) -> bool:
        """True when the candidate speech from `start_ms` to `end_ms` (ms on this stream)
        matches the playing reply: its `match` correlation reaches `ECHO_CORRELATION`, or
        `WEAK_ECHO_CORRELATION` while the reply and the noise floor explain the candidate's
        levels (less than `UNEXPLAINED_SHARE` of its frames, and of at least the last
        `SHARE_SPAN_MS`, `EXCESS_DB` above them)."""
        match = self.match(start_ms, end_ms)
        if match.correlation >= ECHO_CORRELATION:
            return True
        return (match.correlation >= WEAK_ECHO_CORRELATION
                and match.unexplained_share(min(start_ms, end_ms - SHARE_SPAN_MS))
                < UNEXPLAINED_SHARE)


def _reverberant(levels: np.ndarray) -> np.ndarray:
    """`levels` (frames, bands) with a reverberant tail: each frame at least the previous
    one's level minus `REVERB_DECAY_DB_PER_FRAME` (a running maximum of level + decay x frame,
    minus decay x frame)."""
    ramp = REVERB_DECAY_DB_PER_FRAME * np.arange(len(levels))[:, None]
    return np.maximum.accumulate(levels + ramp, axis=0) - ramp


def _best_lag(block: np.ndarray, mic: np.ndarray, mic_top: np.ndarray, floor: np.ndarray,
              max_lag: int) -> EchoMatch:
    """The lag (within `block`) at which the reference correlates best with `mic`.

    Args:
        block: reference levels (count + lags - 1, bands): the window of lag index i is
            block[i : i + count].
        mic: the microphone's levels (count, bands), floored and centred per band.
        mic_top: the microphone's loudest level per band before flooring (dB).
        floor: the microphone's noise floor plus `NOISE_MARGIN_DB` per band (dB).
        max_lag: the lag (frames) of window 0.

    Each window is mapped to the microphone's level (per band, its loudest frame to the
    microphone's loudest), floored where that puts it under `floor`, and within
    `DYNAMIC_RANGE_DB` of the block's loudest, then correlated with `mic` (Pearson's r with
    per-band means; `mic` is centred, so the numerator needs no centred windows, and their
    centred energy is the sum of squares minus count x mean^2).
    """
    count = len(mic)
    windows = np.lib.stride_tricks.sliding_window_view(block, count, axis=0)
    floors = np.maximum(floor - (mic_top - windows.max(axis=2)),
                        block.max() - DYNAMIC_RANGE_DB)
    windows = np.maximum(windows, floors[:, :, None])
    numerator = np.einsum("lbn,nb->l", windows, mic)
    sums = windows.sum(axis=2)
    centred = np.maximum(np.einsum("lbn,lbn->lb", windows, windows) - sums * sums / count,
                         0.0).sum(axis=1)
    energy = centred * float(np.sum(mic * mic))
    scores = np.where(energy > 1e-6, numerator / np.sqrt(np.maximum(energy, 1e-6)), 0.0)
    best = int(np.argmax(scores))
    return EchoMatch(float(scores[best]), (max_lag - best) * FRAME_MS)


def _echo_gain(mic: np.ndarray, aligned: np.ndarray, floor: np.ndarray) -> np.ndarray:
    """The echo's gain per band (dB, microphone over reference; -inf: no audible echo).

    Args:
        mic: the microphone's levels (frames, bands).
        aligned: the reference's levels at the best lag (frames, bands).
        floor: the noise floor plus `NOISE_MARGIN_DB` per band.

    The 25th percentile (the lower one, no interpolation) of microphone minus reference over
    the frames where the reference is within `EXCESS_GAIN_RANGE_DB` of its loudest and the
    microphone above `floor` (a low percentile: frames where someone talks over the echo raise
    the difference, never lower it); a band without such frames has no audible echo.
    """
    audible = (aligned >= aligned.max(axis=0) - EXCESS_GAIN_RANGE_DB) & (mic >= floor)
    differences = np.sort(np.where(audible, mic - aligned, np.inf), axis=0)
    counts = audible.sum(axis=0)
    picked = differences[(np.maximum(counts, 1) - 1) // 4, np.arange(mic.shape[1])]
    return np.where(counts > 0, picked, -np.inf)


def _excess_db(mic: np.ndarray, aligned: np.ndarray, gain: np.ndarray,
               floor: np.ndarray) -> np.ndarray:
    """Per frame, how far the microphone (frames, bands) rises above what the echo (`aligned`
    reference levels plus `gain`, each frame the loudest within `EXCESS_SLACK_FRAMES` of it:
    the playing position is an estimate) and the noise (`floor`) explain, added in power (dB,
    mean over bands of the positive part)."""
    explained = 10.0 * np.log10(10.0 ** (_echo_db(aligned, gain) / 10.0)
                                + 10.0 ** (floor / 10.0))
    return np.maximum(mic - explained, 0.0).mean(axis=1)


def _echo_db(aligned: np.ndarray, gain: np.ndarray) -> np.ndarray:
    """The echo's levels (frames, bands; dB, -inf: none) predicted from the `aligned`
    reference levels and the echo's `gain` per band: each frame the loudest reference level
    within `EXCESS_SLACK_FRAMES` of it (the playing position is an estimate), plus the gain."""
    slack = EXCESS_SLACK_FRAMES
    padded = np.pad(aligned, ((slack, slack), (0, 0)), mode="edge")
    echo = np.lib.stride_tricks.sliding_window_view(padded, 2 * slack + 1, axis=0).max(axis=2)
    return echo + gain
