"""A voice in what the reply's echo does not explain: is a candidate turn over a heard echo a
person speaking, or a room sound (a cough, a horn, a knock, typing) on top of the echo?

Silero scores the microphone's mix. Over a reply, the echo's own speech keeps every window of
that mix at speech (Silero barely depends on level), so a cough under which the echo plays
scores as speech too, and the echo gate (`server.listening.echo.EchoDetector.is_echo`)
credits the cough's energy, which the echo does not explain, to a person: a tester's car horn
over a -10 dB reverberant echo paused the reply 6 of 7 times, a cough, a door or typing over a
-20 dB echo 7 of 9 (the transient detector, `server.listening.transients`, never saw them:
it leaves out windows Silero calls speech). `ResidualVoice` asks Silero about the rest instead:
the microphone with every band of every 10 ms frame the held echo path and the noise explain
taken out (`server.listening.echo_path`'s prediction: the reply's reverberant band levels at the
path's lag and gain, each frame the loudest within its slack, plus the noise floor), the rest
left as it was. A person's
voice over the echo is what remains and scores as speech; a cough or a knock remains as a
noise and does not.

The mask is binary (`unexplained_gains`): Silero hears a softened echo as speech, so a
Wiener-like gain (`server.listening.echo_suppression`, floor -20 dB) left the echo in and
the room sounds still started turns.

Measured offline (`benchmarks/bench_interruptions.py`'s harness; tuned on the room sounds of
`tests/room_sounds.py` at -10 dBFS peak, one seed, 2.0 / 3.5 / 5.0 s into the reply, -20 / -10
dB echoes dry and 400 ms RT60): turns started in 73 of 84 runs without this check, 50 with the
Wiener gain, 15 with bands kept from the echo's level on, 3 with the noise floor added to what
is explained and a run of speech asked for (`MIN_RUN_MS`). "Stop.", "Wait.", "No.", "Hold on."
in three voices at -6 dBFS peak, 2.0 / 4.0 s into the reply over -30 / -10 / -6 dB echoes: 19
of 144 missed without the check (every one 4.0 s in, over a -10 or -6 dB echo as loud as the
voice), 21 with it (two more "Wait." there); 0 of 264 over the -30 dB echo of the issue's grid
either way. The whole room-sound table (table 4): 298 of 336 runs started turns without the
check, 12 with it.

Sans-I/O: 16 kHz samples in, verdicts out (Silero runs here, on the caller's thread).
"""

from __future__ import annotations

import numpy as np

from server.listening.band_envelope import FRAME_MS
from server.listening.echo import EchoDetector
from server.listening.echo_suppression import suppress
from server.listening.silero_vad import SAMPLE_RATE_HZ, WINDOW_MS, SileroStreamingVad
from server.listening.vad import TurnDetectionConfig

LEAD_MS = 300
"""Residual audio Silero hears before the judged stretch (ms): its state settles on the
room's own sound first (a fresh model's first windows score an onset from silence)."""

SPAN_MS = 500
"""The latest audio judged (ms): a candidate held back as echo is asked about on every window,
and a person's voice is in its latest windows."""

KEEP_MS = 3000
"""Microphone audio kept (ms): `LEAD_MS` and `SPAN_MS` back from the latest window, with room
for a candidate asked about after more audio arrived."""

MIN_RUN_MS = 96
"""The shortest run of speech windows (ms: three 32 ms windows, each at the threshold less the
hysteresis, one at the threshold) that is a voice. A single window is not: a cough's onset out
of the masked silence scored 0.62 in one (a -30 dB reverberant echo). Shorter than a turn's
`min_speech_ms` (120): Piper "Hey." at length scale 0.6 (120 ms of sound) at -16 dBFS peak over
a -30 dB echo was missed 2 of 4 with 120 (`benchmarks/bench_interruptions.py`'s fast words over
the reply), none with 96 or 64; with 64 a dropped cup over a -12 dB reverberant echo started a
turn (`tests/test_echo_room_sounds.py`)."""

SUSTAIN_MS = 50
"""The shortest stretch (ms, 10 ms frames) a voice's run keeps its unexplained power within
`SUSTAIN_DB` of its loudest frame: a vowel is driven and holds its level; a struck sound (a knock,
a key click) is loudest at its attack and decays. Silero heard speech in the rest of such a sound
(the reply's echo left whole in the bands the sound covers, the masked bands cut out around it)
on a -6 dBFS knock 5 s into the reply over a -30 dB echo and typing over -10 / -6 dB reverberant
echoes (`benchmarks/bench_interruptions.py` table 4): their runs held it 20-30 ms (a knock's thump
decays in 20 ms, a key's click in 4 ms), "Stop.", "Wait.", "No.", "Hold on." over -30 / -10 dB
echoes 60 ms and more. Not longer: with 80 ms a dog's bark (120-180 ms, decaying over half its
length) held 60-80 ms and was no voice, but 6 more of 144 words over -10 / -6 dB echoes (4 s into
the reply, where 21 were missed already) were missed; with 50 ms, 2 more."""

SUSTAIN_DB = 6.0
"""How far (dB) under a run's loudest unexplained frame a frame still counts as sustained
(`SUSTAIN_MS`): a knock's thump falls that far in 14 ms."""

DECAY_DB_PER_FRAME = -0.9
"""The fall (dB per 10 ms frame, least squares) from a run's loudest unexplained frame on, down to
`SUSTAIN_DB` under it, at which the run is a free decay: a sound excited once (a dog's bark, a door
slammed) is loudest at its onset and falls steadily, a driven vowel holds or rises. Table 4's dog
barks (`benchmarks/bench_interruptions.py`) fell 0.9-1.4 dB a frame over the 40-70 ms after their
loudest frame, the held-out second dog 1.0, door slam 1.2-1.3 and table 4's dog at held-out
levels and echoes up to 1.6 (`DECAY_MIN_MS`); "Stop.", "Wait.", "No.", "Hold on." in three voices
over -30 dB echoes fell 0.64 at most, but over -10 / -6 dB echoes 4 s into the reply a word's
rest fell as fast as a bark's (up to 2.8 over 30-60 ms): only a run Silero is not sure of is
judged so (`DECAY_SURE`)."""

DECAY_MIN_MS = 40
"""The shortest fall (ms, 10 ms frames from the loudest frame on, the loudest included) judged by
`DECAY_DB_PER_FRAME`: a shorter one is a syllable's end as much as a decay."""

DECAY_SURE = 0.85
"""Silero's probability on the rest (`ResidualVoice.voiced`) at or above which a run is a voice
even when it decays: the words over loud echoes whose rest fell as fast as a bark peaked at
0.89-0.95 on it, table 4's barks at 0.50-0.80 and the held-out dog, door slam and barks at
0.49-0.84 (a bark's harmonics in a breath of noise are not quite a voice to Silero). With no
Silero bound (every decaying run no voice), 4 more of those 144 words were missed."""

_KEEP_SAMPLES = KEEP_MS * SAMPLE_RATE_HZ // 1000
_SUSTAIN_FRAMES = SUSTAIN_MS // FRAME_MS
_DECAY_MIN_FRAMES = DECAY_MIN_MS // FRAME_MS


def unexplained_gains(mic_db: np.ndarray, explained_db: np.ndarray) -> np.ndarray:
    """Amplitude gains (frames, bands): 1.0 where the microphone's band level (dB) reaches what
    the echo and the noise explain (dB), 0.0 where they explain it."""
    return np.where(mic_db >= explained_db, 1.0, 0.0)


def unexplained_power_db(mic_db: np.ndarray, explained_db: np.ndarray) -> np.ndarray:
    """Per frame, the power (dB, summed over bands) by which the microphone's band levels (dB,
    (frames, bands)) exceed what the echo and the noise explain (dB); -120 where nothing does."""
    excess = np.maximum(10.0 ** (mic_db / 10.0) - 10.0 ** (explained_db / 10.0), 0.0)
    return 10.0 * np.log10(np.maximum(excess.sum(axis=1), 1e-12))


def sustained(power_db: np.ndarray) -> bool:
    """True when `power_db` (per 10 ms frame, dB) holds within `SUSTAIN_DB` of its loudest frame
    for `SUSTAIN_MS` of consecutive frames."""
    if power_db.size == 0:
        return False
    loud = np.concatenate(([False], power_db >= power_db.max() - SUSTAIN_DB, [False]))
    edges = np.flatnonzero(np.diff(loud.astype(np.int8)))
    return bool(np.max(edges[1::2] - edges[::2]) >= _SUSTAIN_FRAMES)


def decaying(power_db: np.ndarray) -> bool:
    """True when `power_db` (per 10 ms frame, dB) falls freely from its loudest frame: from it on,
    down to the first frame `SUSTAIN_DB` under it, at least `DECAY_MIN_MS` of frames whose least
    squares slope is `DECAY_DB_PER_FRAME` or steeper."""
    if power_db.size == 0:
        return False
    loudest = int(np.argmax(power_db))
    tail = power_db[loudest:]
    under = np.flatnonzero(tail < tail[0] - SUSTAIN_DB)
    if under.size:
        tail = tail[: under[0]]
    if tail.size < _DECAY_MIN_FRAMES:
        return False
    return bool(np.polyfit(np.arange(tail.size), tail, 1)[0] <= DECAY_DB_PER_FRAME)


class ResidualVoice:
    """The microphone stream (16 kHz, the VAD's) for one session, judged against `echo`'s held
    echo path.

    Args:
        echo: the session's echo detector, fed the same stream.
        config: the session's turn detection: the rest holds a voice where a window reaches
            its `threshold` in a run of windows at `threshold` - `hysteresis` at least
            `MIN_RUN_MS` long (a candidate turn would open there with no reply playing).
    """

    def __init__(self, echo: EchoDetector, config: TurnDetectionConfig) -> None:
        self._echo = echo
        self._config = config
        self._audio = np.zeros(0, dtype=np.float32)
        self._first = 0

    def feed(self, pcm_16k: np.ndarray) -> None:
        """Append 16 kHz samples (1-D float) in stream order; the latest `KEEP_MS` are kept."""
        self._audio = np.concatenate((self._audio, np.asarray(pcm_16k, dtype=np.float32)))
        excess = self._audio.size - _KEEP_SAMPLES
        if excess > 0:
            self._audio = self._audio[excess:]
            self._first += excess

    def voiced(self, start_ms: int, end_ms: int) -> bool:
        """True unless the microphone from `start_ms` to `end_ms` (ms on this stream; the last
        `SPAN_MS` of it) holds no voice beyond the held echo: with the bands the echo explains
        taken out (`unexplained_gains`, `HeldEcho.held_explained`), a fresh Silero fed
        from `LEAD_MS` before finds no voice ending there (a run of `MIN_RUN_MS`, `config`).
        A run whose unexplained power is not `sustained` (a struck sound: a knock, typing) is
        no voice either, nor one that is `decaying` (a bark, a slammed door) unless Silero
        reached `DECAY_SURE` on it. True (a voice, as far as this can tell) without a held path
        whose echo was heard, or without the audio or the tagged frames to judge."""
        start_ms = max(start_ms, end_ms - SPAN_MS)
        from_ms = max(start_ms - LEAD_MS, -(-self._first * 1000 // SAMPLE_RATE_HZ))
        levels = self._echo.held.held_explained(from_ms, end_ms)
        if levels is None:
            return True
        mic_db, explained_db, first_ms = levels
        lo = from_ms * SAMPLE_RATE_HZ // 1000 - self._first
        pcm = self._audio[lo : max(end_ms * SAMPLE_RATE_HZ // 1000 - self._first, lo)]
        # Level frame i ends at first_ms + 10 i + 10 ms and analyses the 30 ms before it: its
        # centre is at first_ms + 10 i - 5 ms.
        rest = suppress(
            pcm,
            SAMPLE_RATE_HZ,
            unexplained_gains(mic_db, explained_db),
            first_ms - FRAME_MS // 2 - from_ms,
        )
        power_db = unexplained_power_db(mic_db, explained_db)
        config = self._config
        low = max(config.threshold - config.hysteresis, 0.01)
        run_ms, peak = 0, 0.0
        for window in SileroStreamingVad().feed_windows(rest):
            if window.probability < low:
                run_ms, peak = 0, 0.0
                continue
            run_ms += WINDOW_MS
            peak = max(peak, window.probability)
            run_end_ms = from_ms + window.end_ms
            if run_end_ms > start_ms and peak >= config.threshold and run_ms >= MIN_RUN_MS:
                # Frame i ends at first_ms + 10 i + 10 ms: the run's frames end within it.
                first = max((run_end_ms - run_ms - first_ms) // FRAME_MS, 0)
                run_db = power_db[first : max((run_end_ms - first_ms) // FRAME_MS, first)]
                if sustained(run_db) and (peak >= DECAY_SURE or not decaying(run_db)):
                    return True
        return False
