"""The quiet a backchannel's resume waits for (`server.realtime.pauses.RESUME_SILENCE_MS`,
`server.listening.quiet_after_speech`), on real speech through the server's own input path:
a session under server VAD (Silero, `server.input_work.SessionInput` on its input worker) with
a reply playing, the microphone's audio appended in 40 ms frames as the page sends it.

The words that decide are given as the person said them (this is about when the reply
resumes, not about what the ASR hears: `tests/test_backchannel_done.py` runs the same kind
over the protocol with tiny.en)."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from server.input_work import SessionInput
from server.listening.input_speech import InputSpeechDetector
from server.listening.server_vad_settings import TurnDetection
from server.listening.turn_events import SpeechGap, SpeechResumed
from server.realtime.effects import DecideTranscription, DetectSpeech, Transcribe
from server.realtime.pauses import RESUME_SILENCE_MS
from server.realtime.session import Session, SessionConfig
from tests import room_sounds, speech_fixtures
from tests.pausing_page import mic_pcm16
from tests.test_session import start_reply

FRAME_BYTES = 24000 * 2 * 40 // 1000
"""One 40 ms append at the input rate (the page's frame)."""
VOICES = ("piper", "en-us", "en-gb-x-rp", "en-us+f3", "en-029", "en-gb-scotland", "en-us+m3")
PAIRS = (("okay", "stop"), ("yeah", "wait"), ("uh-huh", "no"), ("right", "hold on"),
         ("mm-hmm", "wait"), ("sure", "stop"))
"""A backchannel, then a real interruption (the tester's "Okay. Stop." and its kind)."""
LEAD_MS = 900
"""Microphone silence before the person speaks (the reply plays meanwhile)."""


def spoken(word: str, voice: str) -> np.ndarray:
    """`word` in `voice` (16 kHz float), the voice's own silence around its sound trimmed
    (`speech_fixtures.active_span_ms`: -40 dBFS): gaps are between the sounds."""
    pcm = (speech_fixtures.speech({"uh-huh": "uh huh"}.get(word, word), "piper")
           if voice == "piper" else speech_fixtures.speech(word, "espeak", voice))
    start_ms, end_ms = speech_fixtures.active_span_ms(pcm)
    return pcm[round(start_ms * 16):round(end_ms * 16)]


@dataclass
class Heard:
    """What the session did with the microphone: its events in order, the input position
    (ms) at which each `response.resumed` came, and server VAD's speech end of the
    first gap (ms)."""

    events: list[dict[str, Any]] = field(default_factory=list)
    resumed_at_ms: list[int] = field(default_factory=list)
    speech_end_ms: int | None = None

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == kind]


async def over_a_reply(mic_16k: np.ndarray, words: list[str],
                       before: np.ndarray | None = None) -> Heard:
    """Stream `mic_16k` (16 kHz float) into a session whose reply plays, through the
    server's input path; each decision transcription is answered with the words said up to
    its gap (`words[:n]` for the n-th), so the first decides on the backchannel alone and a
    later one on everything said. `before`: microphone audio streamed before the reply
    starts (a room server VAD learns meanwhile); positions count from `mic_16k`'s start."""
    session = Session(SessionConfig(lead_ms=400, jitter_ms=100, frame_ms=100))
    session.receive(json.dumps({"type": "session.update", "session": {
        "audio": {"input": {"turn_detection": {"type": "server_vad"}}},
        "interruption": {"pause_timeout_ms": 20000}}}))
    lane = SessionInput(session, None, 1.0)

    async def settle() -> None:
        return None

    async def append(pcm16: bytes) -> None:
        session.receive(json.dumps({"type": "input_audio_buffer.append",
                                    "audio": base64.b64encode(pcm16).decode()}))
        for effect in session.take_effects():
            if isinstance(effect, DetectSpeech):
                lane.queue(effect)
        await lane.detect_speech(lambda: None, settle)

    first = mic_pcm16(before) if before is not None else b""
    for at in range(0, len(first), FRAME_BYTES):
        await append(first[at:at + FRAME_BYTES])
    rid = start_reply(session, "one two three four five six seven eight nine ten.", 8000,
                      done=False)
    session.receive(json.dumps({"type": "playback.ack", "response_id": rid, "played_ms": 0}))
    session.take_events()
    session.take_effects()
    heard = Heard()
    decisions = 0
    pcm16 = mic_pcm16(mic_16k)
    for at in range(0, len(pcm16), FRAME_BYTES):
        await append(pcm16[at:at + FRAME_BYTES])
        for effect in session.take_effects():
            if isinstance(effect, DecideTranscription):
                decisions += 1
                heard.speech_end_ms = heard.speech_end_ms or (
                    effect.audio_end_ms - len(first) * 1000 // (2 * 24000))
                session.turn_taking.on_decision_transcription(
                    effect.item_id, effect.audio_end_ms, ", ".join(words[:decisions]) + ".")
            elif isinstance(effect, Transcribe):
                session.turn_taking.on_transcription(effect.item_id, " ".join(words))
        events = session.take_events()
        heard.events.extend(events)
        position_ms = (len(first) + at + FRAME_BYTES) * 1000 // (2 * 24000)
        heard.resumed_at_ms += [position_ms - len(first) * 1000 // (2 * 24000)
                                for e in events if e["type"] == "response.resumed"]
    return heard


@pytest.mark.parametrize("gap_ms", [300, 420])
@pytest.mark.parametrize(("first", "second"), PAIRS)
async def test_a_backchannel_then_an_interruption_within_420_ms_never_resumes_the_reply(
        first: str, second: str, gap_ms: int) -> None:
    """A backchannel, 300 or 420 ms of silence between the sounds, then a real interruption
    (the tester's "Okay. (420 ms) Stop.": about 300 ms between its sounds), in Piper and six
    espeak-ng voices: the reply never resumes between the words, and the whole utterance cuts
    it. Before, 500 ms of server VAD's silence resumed it in 14 of these 42 pairs at 420 ms
    (a /s/, /h/ or /n/ onset is not speech to Silero for a window or two, and server VAD's
    turn end resumed the reply whatever came next)."""
    resumed = []
    for voice in VOICES:
        mic = np.concatenate([speech_fixtures.silence(LEAD_MS), spoken(first, voice),
                              speech_fixtures.silence(gap_ms), spoken(second, voice),
                              speech_fixtures.silence(1500)])
        heard = await over_a_reply(mic, [first.capitalize(), second])
        assert heard.of_type("response.paused"), voice
        if heard.of_type("response.resumed") or not heard.of_type("output_audio_buffer.cleared"):
            resumed.append(voice)
    assert resumed == []


@pytest.mark.parametrize("word", ["uh-huh", "mm-hmm", "yeah", "right", "okay"])
async def test_a_lone_backchannel_resumes_after_its_quiet_sooner_than_server_vad_s_silence(
        word: str) -> None:
    """A backchannel alone, in Piper and six espeak-ng voices: the reply resumes once
    `RESUME_SILENCE_MS` of quiet followed the end of the person's sound (the resume comes
    within the input path's granularity of that: 40 ms appends, 10 ms level frames, the
    resampler's 30-60 ms steps), and always before the rule this replaced (500 ms of server
    VAD's silence after its speech end, counted to each append's end)."""
    for voice in VOICES:
        sound = spoken(word, voice)
        mic = np.concatenate([speech_fixtures.silence(LEAD_MS), sound,
                              speech_fixtures.silence(1500)])
        heard = await over_a_reply(mic, [word.capitalize()])
        [resumed] = heard.of_type("response.resumed")
        assert resumed["reason"] == "backchannel", voice
        assert resumed["timing"]["silence_ms"] >= RESUME_SILENCE_MS, voice
        sound_end_ms = LEAD_MS + sound.size // 16
        assert heard.speech_end_ms is not None
        assert heard.resumed_at_ms[0] - sound_end_ms < RESUME_SILENCE_MS + 110, voice
        assert heard.resumed_at_ms[0] < heard.speech_end_ms + 500, voice


def test_the_sound_ends_before_silero_s_speech_and_the_next_word_is_heard_sooner() -> None:
    """The tester's "Okay. Stop." (Piper and three espeak-ng voices): the level frames put
    the end of "Okay" at or before server VAD's speech end, and mark the onset of "Stop"
    before server VAD reports speech again."""
    for voice in ("piper", "en-us", "en-gb-scotland", "en-us+f3"):
        said = (speech_fixtures.speech("Okay. Stop.", "piper") if voice == "piper"
                else speech_fixtures.speech("Okay. Stop.", "espeak", voice))
        pcm16 = mic_pcm16(np.concatenate([speech_fixtures.silence(LEAD_MS), said,
                                          speech_fixtures.silence(1000)]))
        detector = InputSpeechDetector(TurnDetection(), 24000, 0)
        vad_end_ms = sound_end_ms = onset_heard_ms = None
        for at in range(0, len(pcm16), FRAME_BYTES):
            before = detector.heard().sound_end_ms
            events = detector.feed(pcm16[at:at + FRAME_BYTES], True)
            gap = [e for e in events if isinstance(e, SpeechGap)]
            if gap and vad_end_ms is None:
                vad_end_ms, sound_end_ms = gap[0].audio_end_ms, before
            if vad_end_ms is not None and onset_heard_ms is None and (
                    detector.heard().sound_end_ms or 0) > vad_end_ms:
                onset_heard_ms = at
            if any(isinstance(e, SpeechResumed) for e in events):
                assert onset_heard_ms is not None and onset_heard_ms < at, voice
                break
        else:
            pytest.fail(f"{voice}: server VAD never heard 'Stop'")
        assert sound_end_ms is not None and vad_end_ms is not None
        assert sound_end_ms <= vad_end_ms, voice


@pytest.mark.parametrize("room", ["babble", "tv"])
async def test_a_room_neither_holds_the_reply_nor_lets_it_resume_between_the_words(
        room: str) -> None:
    """Over babble and a TV talker at -45 dBFS RMS (`tests.room_sounds`; 3 s of it before
    the reply starts, which server VAD learns as the room): a lone "yeah" still resumes the
    reply (the room's own sound is not the person starting again), no later than server VAD's
    turn end would have; "okay", 420 ms, "stop" still never resumes it."""
    make = room_sounds.babble if room == "babble" else room_sounds.tv_talker
    for voice in ("piper", "en-us", "en-gb-x-rp"):
        for words, gap_ms in ((["yeah"], None), (["okay", "stop"], 420)):
            parts = [spoken(words[0], voice)]
            if gap_ms is not None:
                parts += [speech_fixtures.silence(gap_ms), spoken(words[1], voice)]
            speech = np.concatenate([speech_fixtures.silence(LEAD_MS), *parts,
                                     speech_fixtures.silence(1500)])
            room_audio = make(speech.size / 16 + 3010, -45.0)
            mic = speech + room_audio[48000:48000 + speech.size]
            heard = await over_a_reply(mic, [w.capitalize() for w in words],
                                       before=room_audio[:48000])
            if gap_ms is None:
                assert [e["reason"] for e in heard.of_type("response.resumed")] == [
                    "backchannel"], (voice, words)
                assert heard.speech_end_ms is not None
                assert heard.resumed_at_ms[0] <= heard.speech_end_ms + 560, (voice, words)
            else:
                assert heard.of_type("response.resumed") == [], (voice, words)
