"""Server VAD over the microphone stream: PCM16 at the input rate in, turn events out.

Glue between the session's `DetectSpeech` effects and `server.listening.vad`: a streaming soxr
resampler to 16 kHz (one filter state across appends, so chunk edges add no artefacts), the
streaming Silero VAD, and the `TurnDetector` state machine configured from the session's
`server_vad` settings, with `SpeechGap` at the decision tail of a backchannel
(`server.listening.server_vad_settings.DECISION_TAIL_MS`) and `SpeechPaused` at the utterance
tail a commit keeps (`UTTERANCE_TAIL_MS`). While a reply plays,
`server.listening.echo.EchoDetector` follows
the same 16 kHz stream and is the detector's `echo_gate`: a candidate turn whose audio matches
the reply being played is the assistant's own voice, not a person; and its `voice_onset`: a
turn's audio starts where the person's sound rises above the echo, not with the echo before it;
and `without_echo` takes the echo still in front of that onset out of the audio ASR hears.
A candidate the echo does not explain is still held back when what it does not explain holds no
voice (`server.listening.residual_voice`: a cough or a horn over the echo).
`server.listening.room_background.RoomBackground` follows the stream too and is the
detector's `room_gate`: a candidate turn that is the room's background (babble, a TV) rather
than the person does not start; a turn longer than `max_turn_ms` is committed and the detector
listens anew. Positions are ms on the session's input timeline.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import soxr

from server.listening.band_envelope import FRAME_MS, EchoReference
from server.listening.echo import EchoDetector
from server.listening.echo_and_room import echo_and_room
from server.listening.echo_path import LEARN_GUARD_MS
from server.listening.echo_suppression import band_gains, suppress
from server.listening.pcm16 import pcm16_to_float
from server.listening.quiet_after_speech import HeardSound, QuietAfterSpeech
from server.listening.residual_voice import ResidualVoice
from server.listening.room_background import RoomBackground
from server.listening.server_vad_settings import (
    DECISION_TAIL_MS,
    UTTERANCE_TAIL_MS,
    TurnDetection,
)
from server.listening.silero_vad import SAMPLE_RATE_HZ, SileroStreamingVad
from server.listening.turn_events import SpeechStarted, SpeechStopped, TurnEvent
from server.listening.vad import TurnDetectionConfig, TurnDetector


class InputSpeechDetector:
    """Turn detection for one session's microphone stream.

    Args:
        settings: the session's `server_vad` settings (threshold, prefix padding, silence), or
            its `semantic_vad` settings (a turn ends after the eagerness's longest silence,
            or sooner after `end_turn`).
        input_rate_hz: sample rate of the PCM16 input (24000).
        start_ms: position on the input timeline of the first sample fed (ms).
        max_turn_ms: the longest turn (`TurnDetectionConfig.max_turn_ms`; None: no bound).
    """

    def __init__(self, settings: TurnDetection, input_rate_hz: int, start_ms: int,
                 max_turn_ms: int | None = None) -> None:
        self.settings = settings
        self.start_ms = start_ms
        self._resampler = soxr.ResampleStream(input_rate_hz, SAMPLE_RATE_HZ, 1, dtype="float32")
        self._vad = SileroStreamingVad()
        self._turns = TurnDetector(TurnDetectionConfig(
            threshold=settings.threshold,
            prefix_padding_ms=settings.prefix_padding_ms,
            silence_duration_ms=settings.end_silence_ms,
            pause_ms=UTTERANCE_TAIL_MS,
            gap_ms=DECISION_TAIL_MS,
            max_turn_ms=max_turn_ms,
        ))
        self._rate_hz = input_rate_hz
        self._echo = EchoDetector()
        self._residual = ResidualVoice(self._echo, self._turns.config)
        self._turns.echo_gate = self._echo_or_room_sound
        self._turns.voice_onset = self._echo.voice_onset_ms
        self._turns.echo_refuted = self._echo.echo_refuted
        self._room = RoomBackground()
        self._turns.room_gate = self._room.is_background
        self._turns.room_voice = self._room.voice_start
        self._room.echo_rules = self._echo.echo_rules
        self._room.over_echo_db = self._echo.held.over_echo_db
        self._room.echo_unknown = self._echo_unknown
        self._turns.speech_dropped = self._room.speech_dropped
        self._quiet = QuietAfterSpeech(input_rate_hz)
        self._room_dbfs: float | None = None

    def feed(self, pcm16: bytes, assistant_playing: bool, playback_ms: int | None = None,
             reference: EchoReference | None = None) -> list[TurnEvent]:
        """Run VAD over appended PCM16 LE mono; return the turn events it completes.

        `assistant_playing` raises the detection threshold against the assistant's own voice
        leaking into the microphone (`TurnDetectionConfig.echo_threshold`), and so does a
        `playback_ms` with its `reference` after playback ended (the echo's tail: the session
        gives them for `server.listening.echo.ECHO_TAIL_MS` after the last ACK). The echo
        gate compares the microphone with `reference`, the envelope of the reply being
        played, around `playback_ms`, the reply position (ms) estimated to be playing when this
        audio arrived (`EchoDetector.feed`; either None: nothing to compare, the gate stays
        open). Event positions are on the input timeline (ms).
        """
        samples = pcm16_to_float(pcm16)
        pcm_16k = self._resampler.resample_chunk(samples)
        self._echo.feed(pcm_16k, playback_ms, reference)
        self._residual.feed(pcm_16k)
        self._turns.assistant_playing = assistant_playing or (
            playback_ms is not None and reference is not None)
        self._room.feed(pcm_16k, self._turns.assistant_playing, not assistant_playing)
        events: list[TurnEvent] = []
        for window in self._vad.feed_windows(pcm_16k):
            self._room.advance(window.end_ms, self._turns.echo_held, window.probability)
            if window.probability >= self._turns.config.threshold:
                self._quiet.speech_window(window.end_ms, window.level_dbfs)
            event = self._turns.process(window.end_ms, window.probability, window.level_dbfs)
            if isinstance(event, SpeechStarted):
                self._room.turn_started(event.audio_start_ms)
            elif isinstance(event, SpeechStopped):
                self._room.turn_stopped(event.forced)
            if isinstance(event, SpeechStarted):
                events.append(SpeechStarted(event.audio_start_ms + self.start_ms))
            elif event is not None:
                events.append(replace(event, audio_end_ms=event.audio_end_ms + self.start_ms))
        self._room_dbfs = self._room.loud_dbfs
        self._quiet.frames(samples, self._room_dbfs)
        return events

    def _echo_or_room_sound(self, start_ms: int, end_ms: int) -> bool:
        """The detector's `echo_gate`: the candidate's audio from `start_ms` to `end_ms` (ms on
        this stream) is the reply's echo (`EchoDetector.is_echo`), or the echo with a room
        sound on it that holds no voice (`ResidualVoice.voiced`: a cough, a horn, a knock over
        a heard echo is no person), or the echo with the room's background under it
        (`server.listening.echo_and_room`: a talk radio in the echo's pauses)."""
        return (self._echo.is_echo(start_ms, end_ms)
                or not self._residual.voiced(start_ms, end_ms)
                or echo_and_room(self._echo, self._room.over_loudest_db, start_ms, end_ms))

    def _echo_unknown(self, start_ms: int) -> bool:
        """The room gate's `RoomBackground.echo_unknown`: no echo path is held for a candidate
        starting at `start_ms` (ms on this stream), as `EchoDetector.is_echo` would judge it:
        the path is learned from the windows ending `LEARN_GUARD_MS` before, here as there
        (learning follows the stream in order whoever asks; a later question about an earlier
        candidate sees the path learned so far, as after the echo gate judged a later one)."""
        return self._echo.learn(start_ms - LEARN_GUARD_MS) is None

    @property
    def room_dbfs(self) -> float | None:
        """The room's loud level (dBFS) as learned up to the end of the latest `feed`
        (`RoomBackground.loud_dbfs`), None while no background was learned."""
        return self._room_dbfs

    def heard(self) -> HeardSound:
        """How far the input was judged for the person's sound (in 10 ms frames), where that
        sound last ended and where it last set in after a quiet
        (`server.listening.quiet_after_speech`), on the input timeline."""
        quiet = self._quiet
        return HeardSound(
            quiet.heard_ms + self.start_ms,
            None if quiet.sound_end_ms is None else quiet.sound_end_ms + self.start_ms,
            None if quiet.onset_ms is None else quiet.onset_ms + self.start_ms)

    def end_turn(self, audio_end_ms: int, min_silence_ms: int) -> SpeechStopped | None:
        """`semantic_vad` judged the turn whose speech ended at `audio_end_ms` (ms on the input
        timeline) finished: it stops once its silence reaches `min_silence_ms`, with its
        `SpeechStopped` returned here when it already has, or from a later `feed`; None (and
        no stop) when the person spoke on since (`TurnDetector.end_turn`)."""
        stopped = self._turns.end_turn(audio_end_ms - self.start_ms, min_silence_ms)
        return None if stopped is None else SpeechStopped(audio_end_ms)

    def without_echo(self, pcm16: bytes, start_ms: int) -> np.ndarray | None:
        """`pcm16` (PCM16 LE mono at the input rate, from `start_ms` on the input timeline)
        as float samples for ASR, with the reply's echo suppressed before the person's voice
        onset (`EchoDetector.voice_onset_ms` from `start_ms`): there the audio is the echo's,
        and `server.listening.echo_suppression` takes out what `EchoDetector.echo_levels`
        predicts of it; from the onset on the audio is left as it is (see that module for
        why). None when there is nothing to suppress: the microphone before `start_ms` did not
        hold the reply's echo, that stretch was not fed here, or no voice onset was found."""
        samples = pcm16_to_float(pcm16)
        first = start_ms - self.start_ms
        end = first + samples.size * 1000 // self._rate_hz
        levels = self._echo.echo_levels(first, end)
        onset_ms = self._echo.voice_onset_ms(first, end)
        if levels is None or onset_ms is None or onset_ms <= first:
            return None
        mic_db, echo_db, first_ms = levels
        gains = band_gains(mic_db, echo_db)
        gains[max(0, (onset_ms - first_ms) // FRAME_MS):] = 1.0
        # Level frame i ends at first_ms + 10 i + 10 ms and analyses the 30 ms before it: its
        # centre is at first_ms + 10 i - 5 ms.
        return suppress(samples, self._rate_hz, gains, first_ms - FRAME_MS // 2 - first)
