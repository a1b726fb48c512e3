"""The room's background (babble, a TV, a fan) and the person's own level: which candidate
turns are the person. Sans-I/O: 16 kHz samples in, verdicts out.

Silero scores any speech as speech whatever its level (five-talker babble at -65 dBFS RMS
reaches 0.5 on 69 % of its windows, a TV talker at -45 dBFS on 89 %), so server VAD alone
takes the room's chatter for a turn, and a turn over steady babble never ends. `RoomBackground`
follows the same 512-sample windows as `server.listening.silero_vad.SileroStreamingVad` and keeps:

- the background: the band levels (`BANDS_HZ`) of the last `HISTORY_MS` of windows heard
  outside turns, learned once they are `SETTLE_MS` old (a candidate turn that started by then
  keeps its windows out, and so does speech that started none but stands out of the room: a
  person's "Uh.", a short loud non-speech sound, `server.listening.transients`: a cough, and
  for `VOICE_HOLD_MS` a voice above a learned room, `VOICE_PROBABILITY`: a person's first words
  the room gate rejected), plus the windows before a candidate's start that will be learned so
  (`_room_heard`); windows of the assistant's playback only where its echo does not rule the
  microphone (`echo_rules`: the echo is `server.listening.echo`'s business, but a room heard
  only while a reply plays, or lifted by an auto gain while it does, is still the room) or
  where they stand `ROOM_OVER_ECHO_DB` over the echo the held echo path explains (a room heard
  mostly under the echo);
- the person's level: the `LOUD_PERCENTILE` level of the windows of the person's recent turns
  (`PERSON_HISTORY_MS`), `PERSON_PRIOR_DBFS` before the first one.

The background falls when the room falls (`server.listening.room_fall`): once `FALL_SPAN_MS`
outside turns stay `FALL_DB` below the floor of what was learned (loud babble stopped), what
was learned is forgotten and the room is learned anew, so the person is heard at once after
loud noise, not `HISTORY_MS` later.

A candidate is the person (`is_background` False) when its loudest window reaches the
person's level less `NEAR_DB`, and, once a background is known, one of its windows holds
`ABOVE_DB` more energy than the background's `LOUD_PERCENTILE` band levels explain (energy
counted band by band: a voice stands out where a fan's rumble or a TV's treble does not).
Inside a turn, a window continues the person's speech when it holds `CONTINUE_DB` more; when
no background was learned yet (the microphone started while a reply played), the room heard
in the second before the turn, reply and all, stands in for it there.
A turn that ran into `TurnDetectionConfig.max_turn_ms` is taken for background, not for the
person (`turn_stopped(forced=True)`).

Levels are dB relative to full scale 1.0 (a full-scale sine's RMS is -3 dBFS); window levels
are RMS over 32 ms, as `VadWindow.level_dbfs`. Measured on `tests/room_sounds.py`'s babble
and TV at -45 dBFS RMS (`benchmarks/bench_rooms.py`): the babble's windows reach -39 dBFS,
the TV's -36 dBFS, while a person at -20 dBFS RMS reaches -11 dBFS and their 90th percentile
window is at -14 dBFS.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from server.listening.percentiles import percentile
from server.listening.person_level import (
    COLD_ROOM_MS,
    NEAR_DB,
    PERSON_PRIOR_DBFS,
    near_margin_db,
)
from server.listening.room_fall import FALL_WINDOWS, room_fell
from server.listening.room_under_echo import (
    ECHO_RULES_HEARD_MS,
    room_over_the_echo,
    room_under_the_echo,
)
from server.listening.silero_vad import SAMPLE_RATE_HZ, SILENCE_DBFS, WINDOW_MS, WINDOW_SAMPLES
from server.listening.transients import TransientDetector

BANDS_HZ = ((100, 300), (300, 700), (700, 1500), (1500, 3000), (3000, 5000), (5000, 8000))
"""Bands (Hz) whose energy is compared with the background's: the voice's fundamental, first
and second formants, fricatives."""

HISTORY_MS = 10_000
"""Background windows kept: the last 10 s heard outside turns."""

PERSON_HISTORY_MS = 10_000
"""Window levels of the person's turns kept: their last 10 s of turn audio."""

SETTLE_MS = 1_000
"""Age (ms) at which a window not in a turn becomes background: longer than a candidate turn
takes to start (`echo_min_speech_ms` 200 ms plus its lookback), so a person's first words are never
learned as the room."""

LOUD_PERCENTILE = 90.0
"""How loud the background gets, and how loud the person speaks: this percentile of the
windows' levels (the background band by band)."""

RECENT_MS = 1000
"""The background's loud band levels are raised by how far its last second before
`RECENT_GAP_MS` ahead of the candidate rose over all of it (`_gain_rise`, `RISE_PERCENTILE`):
a room whose gain rises (an auto gain converging) is as loud as it is now, not as it was on
average over `HISTORY_MS`."""

RISE_PERCENTILE = 75.0
"""The percentile of the room's last second and of its background whose rise is the room's
rising gain for a candidate (`_gain_rise`; in a turn, `LOUD_PERCENTILE`'s): an auto gain lifts
it, a sound shorter than a quarter of that second does not, even one the transient detector
(`server.listening.transients`, which keeps coughs, claps and knocks out of that second) does
not find. A turn's end keeps the 90th percentile: with the 75th, a person's turn over a
-45 dBFS TV lifted by an auto gain ran on 2 s over the TV's words after them."""

RECENT_GAP_MS = 500
"""The windows right before a candidate are left out of its last second of background: the
person's own first word may be there, outside the candidate (Silero scored Piper's "Actually,"
at -10 dBFS 0.01-0.05), and would then explain the rest of what they say."""

ABOVE_DB = 12.0
"""Energy above what the background explains, over that background (dB), that one window of
a candidate must hold. Measured on `tests/room_sounds.py`'s backgrounds at -45 dBFS RMS (three
seeds, 25 s each, after 15 s learned; 8-window candidates): the loudest window of babble's
held at most 2.5 dB (99th percentile 1.5 dB), a TV talker's 5.3 dB (4.9 dB)."""

LOUDER_DB = 7.0
"""How far (dB) a candidate's loudest window must rise above the loudest window of the
background (lifted by the largest band rise of the room's gain, `_gain_rise`; in a learned
room, where `LEARNED_LOUDER_DB` may hold, by its broadband rise: the band rises weighted by
the power of the background's loud band levels; the largest alone, in a band the room barely
fills such as a talk radio's 5-8 kHz under a reply's echo, put a person's "Wait." 2.6 dB under
the room's loudest window where the broadband rise puts it 6.3 dB over) to be the person
with less than `ABOVE_DB` of excess: a voice over a room whose loud windows vary (music with
a singer, talk radio, traffic) is louder than anything that room did, while its band excess
over the room's `LOUD_PERCENTILE` levels falls short of `ABOVE_DB` (the person 8-11 dB above
a song's loudest windows: 7.7-13.9 dB excess, in a young room as little as that needs 16).
Measured with `tests/room_sounds.py`'s babble, TV, music and radio at -35 / -45 / -55 dBFS RMS
alone (three seeds, 12 s, with and without `CHROMIUM_AGC_DB`, candidates after
`COLD_ROOM_MS`): their loudest window stood at most 6.1 dB above the room's loudest (the TV
under the auto gain 1.2 s in), 3.8 dB elsewhere; the person's first candidates over music and
radio 4.1-11.7 dB (seeds 0-2)."""

LOUDER_AFTER_MS = 2000
"""A candidate that starts earlier (ms from the microphone's first sample) is never the person
by `LOUDER_DB`: an auto gain lifts the room fastest then (`CHROMIUM_AGC_DB`: +8.5 dB over the
first 2 s, +4 dB over the next 2.6 s). Measured: a TV at -55 dBFS RMS under that gain rising a
quarter faster stood 7 dB over its loudest window 1.2 s in (`tests/test_room_changes.py`)."""

LEARNED_LOUDER_DB = 3.0
"""`LOUDER_DB` in a learned room (`YOUNG_ROOM_MS` heard) from `LEARNED_AFTER_MS` on: no
learned room's own candidate stood more than 0.6 dB above its loudest window (ten rooms
alone: babble, TV, radio, music, street, piano, two to five espeak-ng or Piper talkers, -30 /
-36 / -42 dBFS RMS, two seeds, 20 s), while a person at -20 dBFS RMS over an espeak talk radio
at -32 dBFS RMS (its loudest window -22 dBFS) stood 3.5 dB over it with 9.6 dB of excess
(Piper "Wait.", issue 24's tester: missed): a talker's loudest windows stand about 10 dB over
its RMS, a person's only about 5."""

LEARNED_AFTER_MS = 5000
"""From when (ms from the microphone's first sample) `LEARNED_LOUDER_DB` holds: Chromium's auto
gain reaches its +22 dB 4.6 s in (`CHROMIUM_AGC_DB`); earlier, a TV at -55 dBFS RMS under it
stood 3 dB over its loudest window 3.6 s in (`tests/test_room_changes.py`)."""

LOUDER_ABOVE_DB = 6.0
"""The excess (dB, as `ABOVE_DB`'s) a candidate louder than the room (`LOUDER_DB`) must still
hold: its loudness must be in bands the room's loud levels do not fill (a louder drum hit in
the bass band is not a voice). Half `ABOVE_DB`; the person's candidates above held 7.7-13.9."""

VOICE_PROBABILITY = 0.5
"""Silero's speech probability (`TurnDetectionConfig.threshold`'s default) from which a window
outside turns that stands out of the room as a louder candidate does (`LOUDER_ABOVE_DB` of
excess, at least as loud as the room's loudest window) is a voice above the room, never
learned as the room nor counted in a candidate's background (`_Window.voice`): a person's
first words the room gate rejected would otherwise be the room that the rest of their
sentence is judged against (measured, issue 24's tester: Piper "Excuse me, can you stop for a
second?" at -26 dBFS RMS over an espeak talk radio at -40 dBFS RMS: "Excuse" held 7-12 dB of
excess and was rejected, then counted as the room's last second, it lifted the room's 5-8 kHz
band by 47 dB (the radio has none) and "stop" stood 45 dB below it: no turn). Measured on
ten rooms alone (babble, TV, radio, music, street, piano, two to five espeak-ng or Piper
talkers, -30 / -36 / -42 dBFS RMS, two seeds, 20 s, candidates once `YOUNG_ROOM_MS` was
heard): no window of a learned room held both, except shouted children's words in a room
silent between them (10.3 dB, as loud as the loudest shout)."""

VOICE_HOLD_MS = 3000
"""Age (ms) at which a voice above the room (`VOICE_PROBABILITY`) that started no turn is
learned as the room after all: voices in the room that stand out of it now and then (children
shouting in a room silent between their words, at -36 dBFS RMS: never learned, 19 turns in 40
s) are the room, while a person's sentence goes on within it (Piper "Excuse me, can you stop
for a second?": 2.5 s). A turn that starts forgets them: they were the person's first words."""

CONTINUE_DB = 8.0
"""The same excess (dB) that a window inside a turn must hold to continue it once a background
is known (the person's softer sounds included): below, it counts toward the turn's silence
like a window Silero scores as non-speech, so the room talking on does not hold the turn."""

YOUNG_ROOM_MS = 4000
"""How much of the room (ms of windows outside turns and playback) must have been heard before
its background is trusted as learned. Less, and a candidate needs up to `YOUNG_ABOVE_DB` more
excess (in proportion to what is missing) and, in a cold room (`person_level.near_margin_db`),
a loudest window within `person_level.COLD_NEAR_DB` of the person's level: a few windows'
percentile underestimates how loud the room gets, and an auto gain converges over the first
seconds. Measured, Chromium's (the demo page's `autoGainControl`) on a TV talker at -45 dBFS
RMS through its fake microphone: +10 dB at the first window, +17 dB after 1 s, +20 dB after
2.6 s, +22 dB after 4.6 s, where it stays (`tests/room_sounds.py`'s `CHROMIUM_AGC_DB`)."""

YOUNG_ABOVE_DB = 8.0
"""The most `ABOVE_DB` is raised in a young room (nothing heard yet): at 1.2 s in, the auto gain
above had lifted a TV's window 12.6 dB over the background of its first second."""


def band_levels(windows: np.ndarray) -> np.ndarray:
    """Band powers (dBFS, `BANDS_HZ`) of (n, `WINDOW_SAMPLES`) windows at 16 kHz: (n, bands).

    Power per band is the sum of the Hann-windowed periodogram bins in it, scaled so that the
    bands of white noise add up to its mean square. Digital silence gives `SILENCE_DBFS`."""
    taper = np.hanning(WINDOW_SAMPLES)
    spectrum = np.abs(np.fft.rfft(windows * taper, axis=1)) ** 2
    spectrum *= 2.0 / (WINDOW_SAMPLES * np.sum(taper ** 2))
    freqs = np.fft.rfftfreq(WINDOW_SAMPLES, 1.0 / SAMPLE_RATE_HZ)
    powers = np.stack([spectrum[:, (freqs >= low) & (freqs < high)].sum(axis=1)
                       for low, high in BANDS_HZ], axis=1)
    return 10.0 * np.log10(np.maximum(powers, 10.0 ** (SILENCE_DBFS / 10.0)))


def total_dbfs(bands_db: np.ndarray) -> np.ndarray:
    """The power of all `BANDS_HZ` together (dBFS) of band levels (..., bands) (dBFS): (...)."""
    return 10.0 * np.log10(np.sum(10.0 ** (np.asarray(bands_db) / 10.0), axis=-1))


def _gain_rise(background: np.ndarray, recent: list[np.ndarray],
               percentile: float) -> np.ndarray | float:
    """How far (dB per band, at least 0) the room's last second (`recent` band levels) rose
    over the `background` (windows, bands): the rise of their `percentile` levels, band by
    band. 0.0 without a last second."""
    if not recent:
        return 0.0
    return np.maximum(np.percentile(np.stack(recent), percentile, axis=0)
                      - np.percentile(background, percentile, axis=0), 0.0)


@dataclass(slots=True)
class _Window:
    end_ms: int
    level_dbfs: float
    bands_db: np.ndarray
    playing: bool
    in_turn: bool | None = None
    held: bool = False
    echo_held: bool = False
    transient: bool = False
    voice: bool = False
    echo_tail: bool = False
    over_the_reply: bool | None = None

    @property
    def room(self) -> bool:
        """Heard outside turns, and neither speech held back (as the reply's echo or as the
        person's), a transient nor a voice above the room (`VOICE_PROBABILITY`)."""
        return not (self.in_turn or self.held or self.echo_held or self.transient
                    or self.voice)


_HISTORY_WINDOWS = HISTORY_MS // WINDOW_MS
_PERSON_WINDOWS = PERSON_HISTORY_MS // WINDOW_MS
_RECENT_WINDOWS = RECENT_MS // WINDOW_MS
_YOUNG_WINDOWS = YOUNG_ROOM_MS // WINDOW_MS


@dataclass(slots=True)
class _Turn:
    """The windows of the turn in progress (its last `HISTORY_MS`), and the band levels of the
    windows heard before it that were not yet learned (playback included)."""

    levels: collections.deque[float] = field(
        default_factory=lambda: collections.deque(maxlen=_PERSON_WINDOWS))
    bands: collections.deque[np.ndarray] = field(
        default_factory=lambda: collections.deque(maxlen=_HISTORY_WINDOWS))
    before: list[np.ndarray] = field(default_factory=list)


class RoomBackground:
    """The room's background and the person's level over one 16 kHz input stream.

    Feed the stream in order (`feed`, any piece size: windows are cut as Silero cuts them,
    so `end_ms` matches `VadWindow.end_ms`); say when the turn detector takes each window
    (`advance`) and where turns start and stop (`turn_started`, `turn_stopped`); ask
    `is_background` about a candidate. A window is classified (the person's, or the room's
    once `SETTLE_MS` old) only as the turn detector reaches it, so a large append is learned
    as 40 ms appends are. Positions are ms from the first sample fed. Not thread-safe (one
    caller per instance).
    """

    def __init__(self) -> None:
        self._pending = np.zeros(0, dtype=np.float32)
        self._windows = 0
        self._recent: collections.deque[_Window] = collections.deque()
        self._background: collections.deque[np.ndarray] = collections.deque(
            maxlen=_HISTORY_WINDOWS)
        self._background_dbfs: collections.deque[float] = collections.deque(
            maxlen=_HISTORY_WINDOWS)
        self._person: collections.deque[float] = collections.deque(maxlen=_PERSON_WINDOWS)
        self._voices: collections.deque[_Window] = collections.deque()
        self._turn: _Turn | None = None
        self._room_windows = 0
        self._transients = TransientDetector()
        self.echo_rules: Callable[[int], bool] | None = None
        """Whether the reply's echo may rule the microphone around a playing window (its end
        ms in; `server.listening.echo.EchoDetector.echo_rules`; None: it may always)."""
        self.echo_unknown: Callable[[int], bool] | None = None
        """Whether no echo path tells the reply's echo from the room yet (ms in; None: never)."""
        self.over_echo_db: Callable[[int, int], float | None] | None = None
        """How far (dB) the microphone stands above the reply's echo in the windows ending in
        (from ms, end ms] (`server.listening.held_echo.HeldEcho.over_echo_db`; None: not
        known): a window the echo rules is the room's where it stands `ROOM_OVER_ECHO_DB` over."""

    @property
    def person_dbfs(self) -> float:
        """The person's level (dBFS): `LOUD_PERCENTILE` of their recent turns' window levels,
        `PERSON_PRIOR_DBFS` before their first turn."""
        return percentile(self._person, LOUD_PERCENTILE) if self._person else PERSON_PRIOR_DBFS

    @property
    def loud_dbfs(self) -> float | None:
        """The room's loud level (dBFS): the `LOUD_PERCENTILE` level of the background's
        learned windows (RMS over 32 ms), None while none was learned. A short utterance's
        prosody is measured above it (`server.listening.backchannel.classify`'s `room_dbfs`):
        the room's own voices are not the person's syllables."""
        return (percentile(self._background_dbfs, LOUD_PERCENTILE) if self._background_dbfs
                else None)

    def feed(self, pcm_16k: np.ndarray, playing: bool, echo_tail: bool = False) -> None:
        """Append 16 kHz float samples; `playing`: the reply (`echo_tail`: only its echo's tail,
        the reply stopped) may be in them, so they are learned only `_over_the_reply`.

        Raises:
            ValueError: the input is not 1-D.
        """
        samples = np.asarray(pcm_16k, dtype=np.float32)
        if samples.ndim != 1:
            raise ValueError("pcm_16k must be a 1-D array")
        buffer = np.concatenate((self._pending, samples)) if self._pending.size else samples
        count = buffer.size // WINDOW_SAMPLES
        self._pending = buffer[count * WINDOW_SAMPLES:].copy()
        if count == 0:
            return
        frames = buffer[:count * WINDOW_SAMPLES].reshape(count, WINDOW_SAMPLES)
        powers = np.mean(np.square(frames, dtype=np.float64), axis=1)
        levels = 10.0 * np.log10(np.maximum(powers, 10.0 ** (SILENCE_DBFS / 10.0)))
        for level, bands in zip(levels, band_levels(frames), strict=True):
            self._windows += 1
            self._recent.append(_Window(self._windows * WINDOW_MS, float(level), bands, playing,
                                        echo_tail=playing and echo_tail))

    def advance(self, end_ms: int, held: bool = False, probability: float | None = None
                ) -> None:
        """The turn detector takes the windows up to the one ending at `end_ms` (ms), whose
        Silero speech probability is `probability` (None: unknown): they belong to the turn in
        progress, if any, or to speech it holds back as the reply's echo (`held`); the others
        go to the transient detector (`server.listening.transients`: a cough, a knock), whose
        transients are never the room; windows `SETTLE_MS` older outside turns, held speech and
        transients become background, those of a reply playing only where `echo_rules` says
        the echo does not rule them or they stand `ROOM_OVER_ECHO_DB` above the echo
        (`room_under_echo`)."""
        for window in self._recent:
            if window.end_ms > end_ms:
                break
            if window.in_turn is None:
                window.in_turn = self._turn is not None
                window.echo_held = held
                if self._turn is not None:
                    self._turn.levels.append(window.level_dbfs)
                    self._turn.bands.append(window.bands_db)
                window_probability = probability if window.end_ms == end_ms else None
                self._mark_transient(self._transients.push(
                    window.end_ms, window.level_dbfs, window_probability, window.room))
                window.voice = self._voice_above_the_room(window, window_probability)
        while self._recent and self._recent[0].end_ms <= end_ms - SETTLE_MS:
            window = self._recent.popleft()
            learnable = self._over_the_reply(window)
            under_echo = window.echo_held and window.playing and self._background_dbfs and not (
                window.in_turn or window.held or window.transient or window.voice)
            if (window.room and learnable) or (under_echo and room_under_the_echo(
                    window.level_dbfs, window.end_ms, max(self._background_dbfs),
                    self.over_echo_db)):
                self._learn([window.bands_db])
            elif window.voice and learnable and not (window.in_turn or window.held
                                                     or window.echo_held
                                                     or window.transient):
                self._voices.append(window)
        while self._voices and self._voices[0].end_ms <= end_ms - VOICE_HOLD_MS:
            self._learn([self._voices.popleft().bands_db])
        self._forget_a_fallen_room()

    def _over_the_reply(self, window: _Window) -> bool:
        """Whether `window` may be the room's as far as the assistant's reply goes: none
        played, or the reply's echo does not rule it or it stands over that echo
        (`room_over_the_echo`), kept once the echo gate can tell (`ECHO_RULES_HEARD_MS`)."""
        if window.playing and window.over_the_reply is None:
            over = room_over_the_echo(self.echo_rules, self.over_echo_db, window.end_ms)
            if over or window.end_ms <= self._windows * WINDOW_MS - ECHO_RULES_HEARD_MS:
                window.over_the_reply = over
        return not window.playing or bool(window.over_the_reply)

    def _room_heard(self, window: _Window) -> bool:
        """Whether `window`, not learned yet, stands for the room before a candidate: heard
        outside turns, held speech and transients (`_Window.room`), and outside the reply's
        playback or in its echo's tail after it stopped where `_over_the_reply`. Measured: a
        talk radio heard only under a reply's echo was learned from 1 s after the person paused
        the reply, and its next sentence within that second was a turn; the playback's own
        windows (the echo not ruling them, in them all the same) made a person over music or
        an espeak-ng "No." over a reverberant echo stand too little over the room."""
        return window.room and (not window.playing or (window.echo_tail
                                                       and self._over_the_reply(window)))

    def _voice_above_the_room(self, window: _Window, probability: float | None) -> bool:
        """Whether a window outside turns is a voice above the room, not the room (until
        `VOICE_HOLD_MS` old): `YOUNG_ROOM_MS` of room was learned, Silero scores it
        `VOICE_PROBABILITY` or more, its level (dBFS) is within `NEAR_DB` of the person's
        level and at least the loudest learned window's, and it holds `LOUDER_ABOVE_DB` of
        excess (`_standing`), which no window of a learned room did (see
        `VOICE_PROBABILITY`)."""
        if (window.in_turn or window.held or window.echo_held
                or self._room_windows < _YOUNG_WINDOWS
                or probability is None
                or probability < VOICE_PROBABILITY
                or window.level_dbfs < self.person_dbfs - NEAR_DB
                or window.level_dbfs < max(self._background_dbfs)):
            return False
        standing = self._standing(window.end_ms - WINDOW_MS, [window], False)
        return standing is not None and standing[0] >= LOUDER_ABOVE_DB

    def _mark_transient(self, span: tuple[int, int] | None) -> None:
        """The windows ending in the (start, end] ms `span` are a transient (None: none)."""
        if span is not None:
            for window in self._recent:
                if span[0] < window.end_ms <= span[1]:
                    window.transient = True

    def _learn(self, bands: list[np.ndarray]) -> None:
        """Add windows' band levels to the background."""
        self._room_windows += len(bands)
        self._background.extend(bands)
        if bands:
            self._background_dbfs.extend(total_dbfs(np.stack(bands)).tolist())

    def _forget_a_fallen_room(self) -> None:
        """Forget the background learned so far when the room fell (`FALL_DB`): the windows
        of the last `FALL_SPAN_MS` the turn detector took are all outside turns (the reply's echo
        may be in them: it only makes them louder) and their loud level stays `FALL_DB`
        below the floor of the last `FALL_FLOOR_MS` of that background. The windows before
        them not learned yet are forgotten too."""
        if len(self._background_dbfs) < FALL_WINDOWS:
            return
        heard = [w for w in self._recent
                 if w.in_turn is not None and not w.transient][-FALL_WINDOWS:]
        if len(heard) < FALL_WINDOWS or any(w.in_turn for w in heard):
            return
        loud = percentile(total_dbfs(np.stack([w.bands_db for w in heard])).tolist(),
                          LOUD_PERCENTILE)
        if room_fell(loud, self._background_dbfs):
            self._background.clear()
            self._background_dbfs.clear()
            while self._recent[0] is not heard[0]:
                self._recent.popleft()

    def speech_dropped(self, start_ms: int, end_ms: int) -> None:
        """Speech whose windows end in (`start_ms`, `end_ms`] (ms) started no turn (too short,
        or held back): unless it is the room's (`is_background`), its windows are never
        learned as background. A person's own short sound is not the room: measured, Piper
        "Uh." learned so made the same voice's "Stop." 1.2 s later stand less than
        `ABOVE_DB` above the room's last second, and it started no turn."""
        if self.is_background(start_ms, end_ms):
            return
        for window in self._recent:
            if start_ms < window.end_ms <= end_ms:
                window.held = True

    def voice_start(self, first_ms: int, start_ms: int, gap_ms: int) -> int:
        """Where the person's voice begins in a candidate's speech from `first_ms` that the
        room gate passed from `start_ms` on (ms; the gate had rejected it before): the start
        of its earliest window before `start_ms` within `NEAR_DB` of the person's level that
        holds `LOUDER_ABOVE_DB` of excess (judged as a turn's windows are), reached back over
        gaps of at most `gap_ms` between such windows; `start_ms` when none (a word said in
        the room at -60 dBFS RMS just before the person is not theirs). The person's first word over
        music or traffic holds less than the `ABOVE_DB` a candidate needs, and would
        otherwise be cut from their turn (measured: Piper "Maria, stop." 10 dB above a song's
        loudest windows: the windows of "Maria," held 5.2-9.2 dB, its turn began 650 ms
        after the voice)."""
        voice_ms = start_ms
        for window in reversed([w for w in self._recent if first_ms < w.end_ms <= start_ms]):
            if voice_ms - window.end_ms > gap_ms:
                break
            if window.level_dbfs < self.person_dbfs - NEAR_DB:
                continue
            standing = self._standing(window.end_ms - WINDOW_MS, [window], True)
            if standing is not None and standing[0] >= LOUDER_ABOVE_DB:
                voice_ms = window.end_ms - WINDOW_MS
        return voice_ms

    def turn_started(self, start_ms: int) -> None:
        """A turn started at `start_ms` (its speech start, ms): its windows from there on are
        the person's, never background."""
        self._turn = _Turn()
        self._voices.clear()
        for window in self._recent:
            if window.end_ms <= start_ms and window.in_turn is False:
                self._turn.before.append(window.bands_db)
            elif window.end_ms > start_ms and window.in_turn is not None:
                window.in_turn = True
                self._turn.levels.append(window.level_dbfs)
                self._turn.bands.append(window.bands_db)

    def turn_stopped(self, forced: bool = False) -> None:
        """The turn ended: its window levels become the person's level, or, when `forced` (it
        ran into the longest turn: speech that never paused), its windows become background."""
        turn, self._turn = self._turn, None
        if turn is None:
            return
        if forced:
            self._learn(list(turn.bands))
        else:
            self._person.extend(turn.levels)

    def is_background(self, start_ms: int, end_ms: int) -> bool:
        """True when the speech whose windows end in (`start_ms`, `end_ms`] (ms) is the room
        rather than the person: its loudest window stays more than `NEAR_DB` below the
        person's level (less in a cold room: `_near_db`), or no
        window of it holds `ABOVE_DB` more energy than the background's loud band levels
        explain (up to `YOUNG_ABOVE_DB` more while under `YOUNG_ROOM_MS` of room was heard)
        and, from `LOUDER_AFTER_MS` on, it is not louder than the room (`LOUDER_DB`).
        While a turn is in progress only the second rule holds, with `CONTINUE_DB`.
        False when none of its windows were fed."""
        candidate = [w for w in self._recent if start_ms < w.end_ms <= end_ms]
        if not candidate:
            return False
        in_turn = self._turn is not None
        if not in_turn and (max(w.level_dbfs for w in candidate)
                            < self.person_dbfs - self._near_db(start_ms, candidate)):
            return True
        standing = self._standing(start_ms, candidate, in_turn)
        if standing is None:
            return False
        excess_db, margin_db, over_loudest_db = standing
        if excess_db >= margin_db:
            return False
        louder_db = (LEARNED_LOUDER_DB if start_ms >= LEARNED_AFTER_MS
                     and margin_db == ABOVE_DB else LOUDER_DB)
        return in_turn or start_ms < LOUDER_AFTER_MS or not (
            over_loudest_db >= louder_db and excess_db >= LOUDER_ABOVE_DB)

    def _near_db(self, start_ms: int, candidate: list[_Window]) -> float:
        """`person_level.near_margin_db` for a candidate (`candidate`: its windows, the first
        after `start_ms`); over a reply, the sound before it: the loudest window kept (the last
        `SETTLE_MS`) in the `COLD_ROOM_MS` before it, outside turns and the person's own sounds
        (`_Window.held`, `_Window.voice`), and the room heard (`_room_before`)."""
        echo_unknown = self.echo_unknown
        if echo_unknown is None or not any(w.playing for w in candidate):
            return near_margin_db(start_ms, self.person_dbfs)

        def sound_before() -> tuple[float | None, int]:
            loudest = max((w.level_dbfs for w in self._recent
                           if start_ms - COLD_ROOM_MS < w.end_ms <= start_ms
                           and not (w.in_turn or w.held or w.voice)), default=None)
            heard = self._room_windows + len(self._room_before(start_ms))
            return loudest, heard * WINDOW_MS

        return near_margin_db(start_ms, self.person_dbfs, sound_before,
                              lambda: echo_unknown(start_ms))

    def _room_before(self, start_ms: int) -> list[_Window]:
        """The windows not learned yet that stand for the room before `start_ms` (ms)."""
        return [w for w in self._recent if w.end_ms <= start_ms and self._room_heard(w)]

    def over_loudest_db(self, start_ms: int, ends_ms: np.ndarray) -> np.ndarray | None:
        """How far (dB) the windows ending at `ends_ms` (ms; +inf: not kept) stand above the
        loudest room window learned or heard before `start_ms`; None: no room heard yet."""
        heard = [*self._background_dbfs, *(w.level_dbfs for w in self._room_before(start_ms))]
        levels = {w.end_ms: w.level_dbfs for w in self._recent}
        return None if not heard else np.array([levels.get(int(end), np.inf)
                                                for end in ends_ms]) - max(heard)

    def _standing(self, start_ms: int, candidate: list[_Window], in_turn: bool
                  ) -> tuple[float, float, float] | None:
        """How a candidate (its `candidate` windows, the first after `start_ms`) stands out
        of the background: (the largest energy one of its windows holds above the
        background's loud band levels, dB over their total; the margin that must reach,
        `ABOVE_DB` (raised in a young room) or `in_turn` (a turn's window) `CONTINUE_DB`,
        dB; how far its loudest window rises above the background's loudest, lifted by the
        room's gain rise (`LOUDER_DB`), dB). None while no background is known."""
        before = [w.bands_db for w in self._room_before(start_ms)]
        heard = self._room_windows + len(before)
        background = list(self._background) + before
        if not background and self._turn is not None:
            background = self._turn.before
        if not background:
            return None
        recent = list(self._background) + [
            w.bands_db for w in self._recent
            if w.end_ms <= start_ms - RECENT_GAP_MS and self._room_heard(w)]
        learned = np.stack(background)
        rise = _gain_rise(learned, recent[-_RECENT_WINDOWS:],
                          LOUD_PERCENTILE if in_turn else RISE_PERCENTILE)
        loud_db = np.percentile(learned, LOUD_PERCENTILE, axis=0)
        loud = 10.0 ** ((loud_db + rise) / 10.0)
        powers = 10.0 ** (np.stack([w.bands_db for w in candidate]) / 10.0)
        excess = float(np.maximum(powers - loud, 0.0).sum(axis=1).max())
        excess_db = 10.0 * np.log10(max(excess, 1e-30) / float(loud.sum()))
        margin_db = CONTINUE_DB if in_turn else (
            ABOVE_DB + YOUNG_ABOVE_DB * max(0.0, 1.0 - heard / _YOUNG_WINDOWS))
        rise_db = (float(total_dbfs(loud_db + rise) - total_dbfs(loud_db))
                   if margin_db == ABOVE_DB else float(np.max(rise)))
        over_loudest_db = (max(w.level_dbfs for w in candidate)
                           - float(np.max(total_dbfs(learned))) - rise_db)
        return float(excess_db), margin_db, over_loudest_db
