"""Server-side turn detection: an OpenAI `server_vad` turn detector over Silero's windows
(`server.listening.silero_vad`).

`TurnDetector` is the sans-I/O state machine over (window end ms, probability, level) that
emits `SpeechStarted` / `SpeechStopped` (`server.listening.turn_events`) with OpenAI Realtime
`server_vad` semantics (`threshold` 0.5, `prefix_padding_ms` 300, `silence_duration_ms` 500;
openai `types/realtime/realtime_audio_input_turn_detection.py`) plus a minimum speech duration,
hysteresis (speech continues while probability >= threshold - 0.15), a level-range gate against
hums and an echo guard while the assistant is playing; `SpeechPaused` tells early that a turn
may be ending (for speculative transcription). Its cost is counted with the model's
(`server.listening.silero_vad`).

Echo guard: Silero's probability barely depends on level (Piper speech at -3, -30 and -50 dBFS
peak all reaches 0.96-0.99), so a raised threshold alone cannot reject the assistant's voice
leaking into the microphone, and no level gate can either: Chromium's automatic gain control
(which the page requests) lifts a quiet echo by about 10 dB, to -28..-35 dBFS per loudest 10 ms
frame, as loud as a person. While `assistant_playing` is set, a candidate turn therefore also
has to pass `TurnDetector.echo_gate`, which the server sets to `server.listening.echo`'s comparison
of the microphone with the reply audio actually sent (double-talk detection by cross-correlation).
An earlier absolute gate (mean power of the last `min_speech_ms` >= -35 dBFS while playing) was
removed: AGC lets the echo through it, and it rejected real speech quieter than -35 dBFS.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from dataclasses import dataclass

from server.listening.candidate_gates import (
    ended_word_heard_whole,
    level_range_open,
    loud_span,
    room_held_start,
)
from server.listening.silero_vad import WINDOW_MS
from server.listening.turn_events import (
    SpeechGap,
    SpeechPaused,
    SpeechResumed,
    SpeechStarted,
    SpeechStopped,
    TurnEvent,
)


@dataclass(frozen=True, slots=True)
class TurnDetectionConfig:
    """Parameters of `TurnDetector`; the first three are OpenAI `server_vad`'s, with its
    defaults.

    Attributes:
        threshold: probability at which a window is speech (default 0.5).
        prefix_padding_ms: audio included before the speech start (default 300).
        silence_duration_ms: non-speech after the last speech window that ends a turn
            (default 500).
        min_speech_ms: speech must last this long (ms from the start of its first window)
            before the turn starts (default 120: four 32 ms windows). Silero's own
            `get_speech_timestamps` default is 250, Pipecat's `VADParams.start_secs` 0.2 s,
            LiveKit's `min_speech_duration` 0.05 s. At 250, a short word said quickly was
            never a turn (issue 24: espeak-ng "No." and "Stop." at 250-280 words/min, 163-288
            ms of sound, Piper "Wait." at length scale 0.7); at 150, Piper "Hey." at length
            scale 0.6 (120 ms of sound) at some window offsets. Coughs and noise bursts
            of 50-400 ms start none (Silero does not call them speech:
            `tests/test_vad.py`), the room's babble and TV none
            (`benchmarks/bench_rooms.py`, the room gate).
        echo_min_speech_ms: used instead of `min_speech_ms` while the assistant is playing
            (default 200, Pipecat's `VADParams.start_secs`). A candidate then opens only at
            `echo_threshold`, later than at `threshold`: Piper "Nope." (about 190 ms of sound)
            and "hey" at -12 dBFS peak over a reply ran 224 ms of Silero speech, one window
            short of 250 (missed 4 of 495 runs of "Nope.", "No.", "Wait.", "hey" and "Stop." in
            three voices at 11 positions and three rooms, `benchmarks/bench_interruptions.py`'s
            `interruption`; 0 at 200, none started before the voice). Not shorter: the echo
            gate needs `mic_timeline.MIN_FRAMES` (200 ms) of frames to call a candidate echo,
            and calls a shorter one never echo: at 100 ms (0ccfa32, since reverted) the
            page's barge-in over a Piper echo in `tests/test_browser_microphone.py` timed out
            3 of 3.
        hysteresis: windows down to `threshold - hysteresis` (at least 0.01) continue speech,
            and such windows just before the first one >= threshold count as its start
            (faster-whisper's `neg_threshold` default; default 0.15).
        candidate_gap_ms: before the turn starts, dips below the hysteresis level up to this
            long do not restart the count, e.g. the closure of the "t" in "What time" or
            "Actually" (measured with espeak-ng: up to three windows at 0.16-0.34; default 96 ms).
        min_level_range_db: before the turn starts, the window levels of the last
            `min_speech_ms` (the first window of the speech excluded, windows more than
            `candidate_gates.MODULATION_FLOOR_DB` below the loudest ignored) must differ by
            this much: speech rises and falls by syllable, a hum does not (measured: Silero
            scores harmonic hums at 0.5-0.85 with a level range under 1 dB; speech at the
            start moment ranged 5.5-105 dB). 0 disables the check (default 3.0 dB).
        echo_threshold: used instead of `threshold` while the assistant is playing (default
            0.6). Measured (`benchmarks/bench_backchannel.py`'s 50 recordings 900 ms into the
            microphone, 40 ms appends): at 0.8, 6 short words were never heard over a reply
            (Piper "wait", "uh-uh", "right", "uh huh", espeak-ng en-gb-x-rp and en-029 "stop":
            a missed barge-in, or a backchannel that could not pause), at 0.7 four, at 0.6 one
            (Piper "wait"), at 0.5 none; the echo gate (`echo_gate`) does the rest of the
            echo's rejection: `tests/test_echo.py` passes at 0.6, while at 0.5 a candidate
            begun on the echo put one person's turn start 270 ms before their voice.
        pause_ms: non-speech after the last speech window at which a turn in progress reports
            `SpeechPaused`, when shorter than `silence_duration_ms`; None never reports it
            (default). The server passes the utterance tail its commits keep
            (`server.listening.server_vad_settings.UTTERANCE_TAIL_MS`): the audio is then complete
            up to the end of what a commit at that moment would take.
        gap_ms: non-speech after the last speech window at which a turn in progress reports
            `SpeechGap`, when shorter than `pause_ms` (or `silence_duration_ms`); None never
            reports it (default). The server passes the shorter tail a backchannel decision
            takes (`server.listening.server_vad_settings.DECISION_TAIL_MS`). A speech window
            after a reported gap or pause reports `SpeechResumed`.
        max_turn_ms: the longest turn (ms from its speech start): a turn still speaking then
            returns `SpeechStopped(forced=True)` and the detector listens for a new one (speech
            that never pauses, such as steady babble, is still committed and never holds the
            input); None: no bound (default).

    Raises:
        ValueError: a threshold outside (0, 1), a negative duration or range, or a
            hysteresis outside [0, 1).
    """

    threshold: float = 0.5
    prefix_padding_ms: int = 300
    silence_duration_ms: int = 500
    min_speech_ms: int = 120
    echo_min_speech_ms: int = 200
    hysteresis: float = 0.15
    candidate_gap_ms: int = 96
    min_level_range_db: float = 3.0
    echo_threshold: float = 0.6
    pause_ms: int | None = None
    gap_ms: int | None = None
    max_turn_ms: int | None = None

    def __post_init__(self) -> None:
        for name in ("threshold", "echo_threshold"):
            if not 0.0 < getattr(self, name) < 1.0:
                raise ValueError(f"{name} must be in (0, 1)")
        for name in ("prefix_padding_ms", "silence_duration_ms", "min_speech_ms",
                     "echo_min_speech_ms", "candidate_gap_ms", "min_level_range_db"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0")
        if not 0.0 <= self.hysteresis < 1.0:
            raise ValueError("hysteresis must be in [0, 1)")
        for name in ("pause_ms", "gap_ms", "max_turn_ms"):
            value = getattr(self, name)
            if value is not None and not value >= 0:
                raise ValueError(f"{name} must be >= 0")

    def min_speech(self, playing: bool) -> int:
        """The minimum speech (ms) of a candidate turn: `echo_min_speech_ms` while the
        assistant is `playing`, else `min_speech_ms`."""
        return self.echo_min_speech_ms if playing else self.min_speech_ms


ONSET_LOOKBACK_MS = 64
"""How far the speech start reaches back over windows >= threshold - hysteresis right before
the first window >= threshold (the soft start of "Wait" scores 0.41 in the window before)."""

VOICE_ONSET_MARGIN_MS = 40
"""Audio kept before the voice onset the echo detector locates (ms): its 10 ms frames analyse
30 ms, and the first sound of a word may be fainter than the echo under it."""

FIRST_WORD_RUNS = 8
"""Dropped candidates kept for `TurnDetector`'s look-back at a turn's start (the short words
and their pauses just before it)."""

RECONSIDER_MS = 1000
"""How long after a candidate held back as echo ended (ms) it is judged again
(`TurnDetector._reconsider`): long enough for the reply to play on past a sentence's pause
after its first word (Piper's "Sure." and the pause after it: 600-700 ms), so that an echo that
fell silent with it can be told from the echo."""

OUTLIVED_MS = 100
"""How long a candidate held back as echo must go on after its loud part before that part is
judged again (`TurnDetector._outlived`): the echo refuted must have fallen short after the
part, not only in it (a -10 dB reverberant echo with a person's voice at its end was refuted
at a lag 200 ms off, the turn's audio taken from 500 ms of echo before the voice)."""

HELD_WINDOWS = 128
"""Window levels kept of a candidate (4 s) for `candidate_gates.loud_span`."""


class TurnDetector:
    """OpenAI `server_vad` turn detection over VAD windows; sans-I/O (no model, no clock).

    Feed every window in order to `process`; a window spans `WINDOW_MS` (32 ms) ending at
    `window_end_ms`. With `low = max(active threshold - hysteresis, 0.01)` in a turn, before
    one the lower of that and the idle level `max(threshold - hysteresis, 0.01)` (a candidate
    over a reply opens at `echo_threshold` and runs on to the idle level: Piper's "Nope." and
    "hey" end in windows at 0.41-0.44, one window short of `min_speech_ms` at 0.45):

    - silence: a window >= the active threshold opens a candidate; its speech starts at the
      start of that window, or up to `ONSET_LOOKBACK_MS` earlier over the unbroken run of
      windows >= low right before it;
    - candidate: windows >= low continue it, dips below low longer than `candidate_gap_ms`
      drop it silently (over a reply, one that lasted `min_speech_ms` is judged whole once it
      ended: `candidate_gates.ended_word_heard_whole`); on a window >= low once it lasted
      `min_speech` ms, its recent levels pass the `min_level_range_db` gate and `echo_gate`
      does not call it echo, `SpeechStarted(max(0, start - prefix_padding_ms))` is returned;
    - speaking: a window >= low is speech; once the windows below low reach
      `silence_duration_ms` past the end of the last speech window, `SpeechStopped(end of the
      last speech window)` is returned. (faster-whisper's `get_speech_timestamps` lets a
      window between low and threshold only continue a silence already begun; that cut the
      final "s" of "minutes" off, whose windows score 0.4-0.5 after a 0.2 dip.) Before that,
      with a `pause_ms` shorter than the silence duration, `SpeechPaused(end of the last
      speech window)` is returned once the silence reaches `pause_ms`, once per silence: a
      speech window ends the pause, so a later silence can pause again. Likewise
      `SpeechGap` at `gap_ms`, and a speech window after either returns `SpeechResumed`.

    `assistant_playing` (set by the caller) switches the threshold to `echo_threshold`.
    `echo_gate(start_ms, window_end_ms)` (set by the caller, None: no gate) returns True when
    the candidate's audio from `start_ms` to `window_end_ms` is the assistant's own voice; it
    is asked whether or not `assistant_playing` is set (the microphone hears the end of a reply
    after its playback ended) and says False when it has no reply audio to compare with. A
    candidate it rejects is not dropped (a person may start talking over the echo): from then
    on the gate is asked on every window, each rejection moves the candidate's start to that
    window's end, and the turn starts once `min_speech_ms` of speech passed the gate on every
    window (so a cough over the echo does not start one), reaching back over no echo (only
    `prefix_padding_ms` does). `voice_onset(from_ms, window_end_ms, echo_until_ms)` (set by the
    caller, None: none) returns where the person's own sound begins after `from_ms`, or None
    when it cannot tell; `echo_until_ms` is where the candidate's speech began when the gate
    moved its start past that (None otherwise). The turn's audio then starts at that onset
    less `VOICE_ONSET_MARGIN_MS` when that is later than the speech start minus
    `prefix_padding_ms`, so that a committed turn does not begin with the assistant's echo
    (Silero scores that echo as speech too: the speech start may lie on it).
    `room_gate(start_ms, window_end_ms)` (set by the caller, None: no gate; the server's is
    `server.listening.room_background.RoomBackground.is_background`) returns True when the
    candidate's speech is the room's background, not the person: like an echo rejection, the
    candidate's start then moves to that window's end, so a turn needs `min_speech_ms` of
    speech the room gate passed (a candidate the echo gate held back is judged from where its
    voice came in, `candidate_gates.loud_span`, when that is earlier), and
    once passed it starts at the person's voice before its last rejection, when
    `room_voice(first_ms, start_ms, gap_ms)` (set by the caller, None: none; the server's is
    `RoomBackground.voice_start`) finds it there in the candidate's speech from `first_ms`,
    over gaps up to `prefix_padding_ms`, else past the room's windows (`past_the_room`); in a
    turn, a window the room gate calls background counts toward the silence (a TV talking on
    after the person stopped ends the turn). A candidate the echo gate held back is judged
    again after it ended (`_reconsider`, with `echo_refuted(first_ms, speech_end_ms,
    window_end_ms)`, set by the caller, None: none; the server's is
    `server.listening.echo.EchoDetector.echo_refuted`). `speech_dropped(first_ms, end_ms)`
    (set by the caller, None: none) hears of every run of speech that started no turn.
    """

    def __init__(self, config: TurnDetectionConfig | None = None) -> None:
        """Start in silence with `config` (defaults: `TurnDetectionConfig()`)."""
        self.config = config or TurnDetectionConfig()
        self.assistant_playing = False
        self.echo_gate: Callable[[int, int], bool] | None = None
        self.voice_onset: Callable[[int, int, int | None], int | None] | None = None
        self.room_gate: Callable[[int, int], bool] | None = None
        self.room_voice: Callable[[int, int, int], int] | None = None
        self.echo_refuted: Callable[[int, int, int], bool] | None = None
        self.speech_dropped: Callable[[int, int], None] | None = None
        self._turn_start_ms = 0
        self._last_end_ms: int | None = None
        self._run_start_ms: int | None = None
        self._start_ms: int | None = None
        self._echo_held = False
        self._room_held = False
        self._held: tuple[int, int] | None = None
        self._speaking = False
        self._paused = False
        self._gapped = False
        self._speech_end_ms = 0
        self._early_stop_ms: int | None = None
        self._recent: collections.deque[tuple[int, float | None]] = collections.deque()
        self._levels: collections.deque[tuple[int, float | None]] = collections.deque(
            maxlen=HELD_WINDOWS)
        self._dropped: collections.deque[tuple[int, int]] = collections.deque(
            maxlen=FIRST_WORD_RUNS)

    @property
    def speaking(self) -> bool:
        """True between a `SpeechStarted` and its `SpeechStopped`."""
        return self._speaking

    @property
    def echo_held(self) -> bool:
        """True while a candidate turn is held back as the reply's echo (`echo_gate`)."""
        return self._echo_held

    def reset(self) -> None:
        """Return to silence, dropping a candidate or a turn in progress without an event.
        Window positions may then start over (any non-negative `window_end_ms`)."""
        self._last_end_ms = None
        self._stop()
        self._dropped.clear()
        self._held = None
        self._drop_candidate()

    def end_turn(self, audio_end_ms: int, min_silence_ms: int) -> SpeechStopped | None:
        """End the turn in progress once its silence reaches `min_silence_ms`, sooner than
        `silence_duration_ms` (a semantic end of turn), when its last speech window ended at
        `audio_end_ms`: `SpeechStopped(audio_end_ms)` now when the silence is already that
        long, else from the window that makes it so (`process`). None, and nothing changes,
        without a turn or when the person spoke on (the verdict was on speech that is no
        longer the turn's end); speech before the stop cancels it."""
        if not self._speaking or self._speech_end_ms != audio_end_ms:
            return None
        if self._last_end_ms is not None and (
                self._last_end_ms - self._speech_end_ms >= min_silence_ms):
            self._stop()
            return SpeechStopped(audio_end_ms)
        self._early_stop_ms = min_silence_ms
        return None

    def _stop(self) -> None:
        self._speaking = False
        self._paused = self._gapped = False
        self._early_stop_ms = None

    def process(
        self, window_end_ms: int, probability: float, level_dbfs: float | None = None
    ) -> TurnEvent | None:
        """Take the next window and return the event it completes, if any.

        Args:
            window_end_ms: end of the window, ms on the input timeline; never decreasing.
            probability: speech probability of the window in [0, 1].
            level_dbfs: RMS level of the window (`VadWindow.level_dbfs`), or None when
                unknown: the level gates are open while a recent window has no level.

        Raises:
            ValueError: `window_end_ms` is negative or below the previous one, or the
                probability is not in [0, 1].
        """
        if window_end_ms < 0 or (self._last_end_ms is not None
                                 and window_end_ms < self._last_end_ms):
            raise ValueError("window_end_ms must be >= 0 and never decrease")
        if not 0.0 <= probability <= 1.0:
            raise ValueError("probability must be in [0, 1]")
        self._last_end_ms = window_end_ms
        config = self.config
        threshold = config.echo_threshold if self.assistant_playing else config.threshold
        low = max(threshold - config.hysteresis, 0.01)
        if self._speaking:
            return self._continue_turn(window_end_ms, probability, low)
        if self._held is not None:
            started = self._reconsider(window_end_ms, probability >= low)
            if started is not None:
                return started
        run_low = min(low, max(config.threshold - config.hysteresis, 0.01))
        if self._start_ms is None:
            return self._listen(window_end_ms, probability, level_dbfs, threshold, run_low)
        self._remember(window_end_ms, level_dbfs)
        if probability < run_low:
            if window_end_ms - self._speech_end_ms > config.candidate_gap_ms:
                if self._echo_held:
                    self._held = (self._loud_span()[0], self._speech_end_ms)
                else:
                    self._drop_run(self._first_ms(), self._speech_end_ms)
                    if ended_word_heard_whole(self.assistant_playing, self._start_ms,
                                              self._speech_end_ms, config, self._levels):
                        self._held = (self._start_ms, self._speech_end_ms)
                self._drop_candidate()
            return None
        self._speech_end_ms = window_end_ms
        return self._maybe_start(window_end_ms, self._start_ms)

    def _listen(self, window_end_ms: int, probability: float, level_dbfs: float | None,
                threshold: float, low: float) -> TurnEvent | None:
        """Silence: track the run of windows >= low; a window >= threshold opens a candidate."""
        if probability < low:
            if self._run_start_ms is not None:
                self._drop_run(self._run_start_ms, self._speech_end_ms)
            self._drop_candidate()
            return None
        window_start_ms = max(window_end_ms - WINDOW_MS, 0)
        if self._run_start_ms is None:
            self._run_start_ms = window_start_ms
        self._speech_end_ms = window_end_ms
        self._remember(window_end_ms, level_dbfs)
        if probability < threshold:
            return None
        self._start_ms = max(self._run_start_ms, window_start_ms - ONSET_LOOKBACK_MS)
        self._speech_end_ms = window_end_ms
        return self._maybe_start(window_end_ms, self._start_ms)

    def _drop_run(self, first_ms: int, end_ms: int) -> None:
        """A run of speech windows (`first_ms` to `end_ms`) started no turn: kept for the
        first-word look-back and told to `speech_dropped`."""
        self._dropped.append((first_ms, end_ms))
        if self.speech_dropped is not None:
            self.speech_dropped(first_ms, end_ms)

    def _reconsider(self, window_end_ms: int, speech: bool) -> SpeechStarted | None:
        """Judge the last candidate the echo gate held back again, on what the microphone
        heard since its speech ended, until `RECONSIDER_MS` after that (`speech`: the current
        window is speech). Its turn starts now, taking in any speech begun since, when
        `echo_refuted` refutes that its speech was the echo (an echo cannot fall silent while
        the reply plays on; a person's short word can), or when the echo gate no longer calls
        its speech with the silence after it the echo (up to any speech begun since, which is
        judged as a candidate of its own). Measured: with no echo path learned yet, "Stop."
        over a reply's first word correlated 0.82 with it and was held back as echo."""
        assert self._held is not None
        first_ms, end_ms = self._held
        if window_end_ms - end_ms > RECONSIDER_MS:
            self._held = None
            return None
        since_ms = self._run_start_ms
        if since_ms is None:
            since_ms = window_end_ms - WINDOW_MS if speech else window_end_ms
        echo = not self._refuted(first_ms, end_ms, window_end_ms) and (
            since_ms <= end_ms or self._is_echo(first_ms, since_ms))
        if echo or (self.room_gate is not None and self.room_gate(first_ms, end_ms)):
            return None
        self._held = None
        if self._run_start_ms is not None or self._start_ms is not None:
            end_ms = max(end_ms, self._speech_end_ms)
        if speech:
            end_ms = window_end_ms
        started = self._start_turn(first_ms, window_end_ms)
        self._speech_end_ms = end_ms
        return started

    def _loud_span(self) -> tuple[int, int]:
        """`candidate_gates.loud_span` of the current candidate."""
        return loud_span(self._levels, self._first_ms(), self._speech_end_ms)

    def _remember(self, window_end_ms: int, level_dbfs: float | None) -> None:
        """Keep the levels of the candidate's windows that end within its `min_speech`."""
        self._recent.append((window_end_ms, level_dbfs))
        self._levels.append((window_end_ms, level_dbfs))
        span = max(self.config.min_speech(self.assistant_playing), WINDOW_MS)
        while self._recent[0][0] <= window_end_ms - span:
            self._recent.popleft()

    def _maybe_start(self, window_end_ms: int, start_ms: int) -> SpeechStarted | None:
        """Start the turn when the candidate (speech from `start_ms`) lasted `min_speech_ms`
        and its recent windows pass the level and echo gates. Once the echo gate rejected the
        candidate, it is asked on every window, and each rejection moves the start to that
        window's end: the turn needs `min_speech_ms` of speech the gate passed throughout."""
        if self._echo_held and self._is_echo(start_ms, window_end_ms):
            return self._outlived(window_end_ms)
        if window_end_ms - start_ms < self.config.min_speech(self.assistant_playing) or (
                not level_range_open(self._recent, start_ms, self.config.min_level_range_db)):
            return None
        heard_from_ms = min(start_ms, self._loud_span()[0]) if self._echo_held else start_ms
        if self.room_gate is not None and self.room_gate(heard_from_ms, window_end_ms):
            self._start_ms = window_end_ms
            self._room_held = True
            return None
        if not self._echo_held and self._is_echo(start_ms, window_end_ms):
            self._echo_held = True
            self._start_ms = window_end_ms
            return None
        if self._room_held and not self._echo_held:
            start_ms = room_held_start(self.room_voice, self.room_gate, self._first_ms(),
                                       start_ms, window_end_ms, self.config.prefix_padding_ms)
        return self._start_turn(start_ms, window_end_ms)

    def _start_turn(self, start_ms: int, window_end_ms: int) -> SpeechStarted:
        """Start the turn whose speech began at `start_ms` (ms), decided at `window_end_ms`:
        its audio reaches back over its first word to the voice onset (`_audio_start`)."""
        audio_start_ms = self._audio_start(self._first_word_ms(start_ms), window_end_ms)
        self._dropped.clear()
        self._drop_candidate()
        self._speaking = True
        self._turn_start_ms = start_ms
        return SpeechStarted(audio_start_ms)

    def _outlived(self, window_end_ms: int) -> SpeechStarted | None:
        """A candidate the echo gate still holds back that goes on after its loud part (Silero
        hears the quieter echo after a person's short word as speech too): its turn starts now
        when `echo_refuted` refutes that the loud part was the echo, on what the microphone
        heard since (up to `RECONSIDER_MS` after it), as `_reconsider` judges a candidate whose
        speech ended. Measured: Piper "No." 300 ms into the first reply over a -30 dB echo
        correlated 0.83 with a reply word and ran on as one candidate with the echo after it;
        it was never judged again and the reply played on."""
        loud_start_ms, loud_end_ms = self._loud_span()
        if (not OUTLIVED_MS <= window_end_ms - loud_end_ms <= RECONSIDER_MS
                or not self._refuted(loud_start_ms, loud_end_ms, window_end_ms)
                or (self.room_gate is not None and self.room_gate(loud_start_ms, loud_end_ms))):
            self._start_ms = window_end_ms
            return None
        return self._start_turn(loud_start_ms, window_end_ms)

    def _audio_start(self, start_ms: int, window_end_ms: int) -> int:
        """The turn's audio start: the speech start minus the prefix padding, but not before
        the person's voice onset (minus `VOICE_ONSET_MARGIN_MS`) when `voice_onset` finds one
        there, even after the speech start: the padding holds the person's own audio, not the
        assistant's echo before it. The audio before the candidate's first speech window
        (when the echo gate moved the start past it) is no person's: `voice_onset` may
        measure the echo there."""
        padded = max(start_ms - self.config.prefix_padding_ms, 0)
        if self.voice_onset is None:
            return padded
        first_ms = min(self._first_ms(), start_ms)
        echo_until_ms = first_ms if first_ms < padded else None
        onset = self.voice_onset(padded, window_end_ms, echo_until_ms)
        if onset is None:
            return padded
        return max(padded, onset - VOICE_ONSET_MARGIN_MS)

    def _first_ms(self) -> int:
        """Where the current candidate's speech began: its run of windows >= low, before the
        echo gate moved its start on."""
        if self._run_start_ms is not None:
            return self._run_start_ms
        return self._start_ms if self._start_ms is not None else 0

    def _first_word_ms(self, start_ms: int) -> int:
        """The turn's speech start, looking back from `start_ms` past the trigger: a run of
        windows >= low dropped before it (too short, or never >= threshold, then a pause
        longer than `candidate_gap_ms`) whose last window ends within `prefix_padding_ms`
        before it is the same person's speech, and so on back, no further than
        `prefix_padding_ms` + `silence_duration_ms` before the trigger (a longer pause would
        have ended a turn), not past a run the echo gate calls echo; the earliest such run
        from which the speech up to the last run is not the room's (room gate): the room's
        runs just before the person (babble at -65 dBFS: up to 880 ms early) are not their
        first word, a soft "st" after "Wait" still links it. Measured on Piper "Wait, stop, I
        have a question.": "Wait" (1056-1280 ms, Silero 0.82-0.91) is too short to start a
        turn, the "st" of "stop" scores 0.48-0.49 (1568-1632), and the trigger (1664) less the
        padding began the turn 84 ms after "Wait" ended: ASR heard "Stop, I have a question."."""
        config = self.config
        reach_ms = start_ms - config.prefix_padding_ms - config.silence_duration_ms
        first_ms = start_ms
        last_end_ms: int | None = None
        for run_start_ms, run_end_ms in reversed(self._dropped):
            if (run_end_ms < start_ms - config.prefix_padding_ms or run_start_ms >= start_ms
                    or run_start_ms < reach_ms):
                break
            if self._is_echo(run_start_ms, run_end_ms):
                break
            start_ms = run_start_ms
            if last_end_ms is None:
                last_end_ms = run_end_ms
            if self.room_gate is None or not self.room_gate(run_start_ms, last_end_ms):
                first_ms = run_start_ms
        return first_ms

    def _refuted(self, first_ms: int, speech_end_ms: int, window_end_ms: int) -> bool:
        """`echo_refuted`'s verdict on the candidate's speech (False without one)."""
        return self.echo_refuted is not None and self.echo_refuted(
            first_ms, speech_end_ms, window_end_ms)

    def _is_echo(self, start_ms: int, window_end_ms: int) -> bool:
        """The echo gate's verdict on the candidate's audio (False without a gate)."""
        return self.echo_gate is not None and self.echo_gate(start_ms, window_end_ms)

    def _drop_candidate(self) -> None:
        self._run_start_ms = None
        self._start_ms = None
        self._echo_held = False
        self._room_held = False
        self._recent.clear()
        self._levels.clear()

    def _continue_turn(self, window_end_ms: int, probability: float,
                       low: float) -> TurnEvent | None:
        """Speaking state: a window >= low is speech (resuming a reported gap or pause), a
        lower one counts toward the silence (a gap at `gap_ms`, a pause at `pause_ms`, the
        stop at `silence_duration_ms`)."""
        max_turn_ms = self.config.max_turn_ms
        if max_turn_ms is not None and window_end_ms - self._turn_start_ms >= max_turn_ms:
            self._speaking = False
            self._paused = self._gapped = False
            return SpeechStopped(window_end_ms, forced=True)
        if probability >= low and not (self.room_gate is not None and self.room_gate(
                window_end_ms - WINDOW_MS, window_end_ms)):
            self._speech_end_ms = window_end_ms
            resumed = self._paused or self._gapped
            self._paused = self._gapped = False
            self._early_stop_ms = None
            return SpeechResumed(window_end_ms) if resumed else None
        silence_ms = window_end_ms - self._speech_end_ms
        stop_ms = self.config.silence_duration_ms
        if self._early_stop_ms is not None:
            stop_ms = min(stop_ms, self._early_stop_ms)
        if silence_ms >= stop_ms:
            self._stop()
            return SpeechStopped(self._speech_end_ms)
        gap_ms = self.config.gap_ms
        if not self._gapped and gap_ms is not None and silence_ms >= gap_ms:
            self._gapped = True
            return SpeechGap(self._speech_end_ms)
        pause_ms = self.config.pause_ms
        if self._paused or pause_ms is None or silence_ms < pause_ms:
            return None
        self._paused = True
        return SpeechPaused(self._speech_end_ms)
