"""Speculative transcription in the sans-I/O session: what a server VAD pause prepares and
whether the commit may claim it (same item, byte-identical audio)."""

from __future__ import annotations

import base64
import json
from typing import Any

import numpy as np

from server.listening.input_speech import InputSpeechDetector
from server.listening.server_vad_settings import UTTERANCE_TAIL_MS
from server.listening.turn_events import (
    SpeechGap,
    SpeechPaused,
    SpeechResumed,
    SpeechStarted,
    SpeechStopped,
)
from server.realtime.effects import DiscardTranscription, PrepareTranscription, Transcribe
from server.realtime.session import Session
from server.speech.resampling import resample
from tests import speech_fixtures

RATE = 24000
SERVER_VAD = {"type": "server_vad", "threshold": 0.5, "prefix_padding_ms": 300,
              "silence_duration_ms": 500, "create_response": True, "interrupt_response": True}


def send(target: Session, **event: Any) -> list[dict[str, Any]]:
    target.receive(json.dumps(event))
    return target.take_events()


def vad_session() -> Session:
    session = Session()
    send(session, type="session.update",
         session={"audio": {"input": {"turn_detection": SERVER_VAD}}})
    return session


def ramp(start_ms: int, ms: int) -> bytes:
    """PCM16 whose every sample tells its position (so equal bytes mean equal spans)."""
    first = start_ms * RATE // 1000
    samples = np.arange(first, first + ms * RATE // 1000) % 32768
    return samples.astype("<i2").tobytes()


def append_pcm16(session: Session, pcm16: bytes) -> None:
    send(session, type="input_audio_buffer.append", audio=base64.b64encode(pcm16).decode())


def append(session: Session, start_ms: int, ms: int) -> None:
    append_pcm16(session, ramp(start_ms, ms))


def only(effects: list[Any], kind: type) -> list[Any]:
    return [e for e in effects if isinstance(e, kind)]


def test_a_turn_ending_at_its_pause_commits_exactly_the_prepared_audio() -> None:
    session = vad_session()
    append(session, 0, 1000)
    session.turn_taking.on_speech_started(700)
    append(session, 1000, 1400)
    session.take_events(), session.take_effects()
    session.turn_taking.on_speech_paused(2000)
    assert session.take_events() == [], "a pause announces nothing"
    [prepared] = only(session.take_effects(), PrepareTranscription)
    assert prepared.pcm16 == ramp(700, 2000 + UTTERANCE_TAIL_MS - 700)
    assert prepared.audio_start_ms == 700
    append(session, 2400, 200)
    session.turn_taking.on_speech_stopped(2000)
    events = session.take_events()
    assert [e["type"] for e in events[:2]] == ["input_audio_buffer.speech_stopped",
                                               "input_audio_buffer.committed"]
    [transcribe] = only(session.take_effects(), Transcribe)
    assert (transcribe.item_id, transcribe.prepared) == (prepared.item_id, True)
    assert transcribe.pcm16 == prepared.pcm16
    assert transcribe.audio_start_ms == 700


def test_speech_after_a_pause_commits_other_audio_and_a_later_pause_prepares_it() -> None:
    session = vad_session()
    append(session, 0, 1000)
    session.turn_taking.on_speech_started(700)
    append(session, 1000, 1400)
    session.turn_taking.on_speech_paused(2000)
    [first] = only(session.take_effects(), PrepareTranscription)
    append(session, 2400, 800)
    session.turn_taking.on_speech_stopped(2800)
    [transcribe] = only(session.take_effects(), Transcribe)
    assert transcribe.item_id == first.item_id and not transcribe.prepared
    assert transcribe.pcm16 != first.pcm16
    assert transcribe.pcm16 == ramp(700, 2800 + UTTERANCE_TAIL_MS - 700)

    append(session, 3200, 500)
    session.turn_taking.on_speech_started(3300)
    append(session, 3700, 1500)
    session.turn_taking.on_speech_paused(4000)
    session.turn_taking.on_speech_paused(4600)
    effects = only(session.take_effects(), PrepareTranscription)
    assert [len(e.pcm16) for e in effects] == [
        len(ramp(3300, 4000 + UTTERANCE_TAIL_MS - 3300)),
        len(ramp(3300, 4600 + UTTERANCE_TAIL_MS - 3300))]
    session.turn_taking.on_speech_stopped(4600)
    [transcribe] = only(session.take_effects(), Transcribe)
    assert transcribe.prepared and transcribe.pcm16 == effects[-1].pcm16


def test_a_prepared_transcription_is_discarded_when_its_turn_cannot_commit() -> None:
    session = vad_session()
    append(session, 0, 1000)
    session.turn_taking.on_speech_started(700)
    append(session, 1000, 1400)
    session.turn_taking.on_speech_paused(2000)
    [prepared] = only(session.take_effects(), PrepareTranscription)
    send(session, type="input_audio_buffer.clear")
    assert session.take_effects() == [DiscardTranscription(prepared.item_id)]
    session.turn_taking.on_speech_stopped(2000)
    assert session.take_effects() == [], "the cleared turn is not committed"

    session.turn_taking.on_speech_started(2500)
    append(session, 2400, 1000)
    session.turn_taking.on_speech_paused(3000)
    [prepared] = only(session.take_effects(), PrepareTranscription)
    send(session, type="session.update",
         session={"audio": {"input": {"turn_detection": {**SERVER_VAD, "threshold": 0.6}}}})
    assert session.take_effects() == [DiscardTranscription(prepared.item_id)]

    session.turn_taking.on_speech_started(3100)
    append(session, 3400, 600)
    session.turn_taking.on_speech_paused(3600)
    session.take_effects()
    send(session, type="input_audio_buffer.commit")
    [transcribe] = only(session.take_effects(), Transcribe)
    assert not transcribe.prepared, "a manual commit is another item"


def test_pauses_of_real_speech_prepare_what_the_commit_takes() -> None:
    """Real Piper speech with a 380 ms gap between its halves, through the real server VAD: the
    gap pauses the turn without ending it, so its speculation is stale; the final pause
    prepares exactly the committed audio."""
    first = speech_fixtures.speech("Tell me about the planets")
    second = speech_fixtures.speech("and their moons.")
    track = speech_fixtures.place(np.concatenate((first, speech_fixtures.silence(380), second)),
                                  lead_ms=600, tail_ms=1200)
    pcm16 = speech_fixtures.to_pcm16(resample(track, speech_fixtures.RATE_HZ, RATE))
    session = vad_session()
    assert session.turn_detection is not None
    detector = InputSpeechDetector(session.turn_detection, RATE, 0)
    frame = RATE * 2 * 40 // 1000
    turn_events: list[Any] = []
    prepared: list[PrepareTranscription] = []
    transcribed: list[Transcribe] = []
    for start in range(0, len(pcm16), frame):
        append_pcm16(session, pcm16[start:start + frame])
        session.take_effects()
        for event in detector.feed(pcm16[start:start + frame], False):
            turn_events.append(event)
            if isinstance(event, SpeechStarted):
                session.turn_taking.on_speech_started(event.audio_start_ms)
            elif isinstance(event, SpeechGap):
                session.turn_taking.on_speech_gap(event.audio_end_ms)
            elif isinstance(event, SpeechPaused):
                session.turn_taking.on_speech_paused(event.audio_end_ms)
            elif isinstance(event, SpeechResumed):
                session.turn_taking.on_speech_resumed()
            else:
                session.turn_taking.on_speech_stopped(event.audio_end_ms)
        effects = session.take_effects()
        prepared += only(effects, PrepareTranscription)
        transcribed += only(effects, Transcribe)
    assert [type(e) for e in turn_events] == [SpeechStarted, SpeechGap, SpeechPaused,
                                              SpeechResumed, SpeechGap, SpeechPaused,
                                              SpeechStopped]
    assert turn_events[5].audio_end_ms == turn_events[6].audio_end_ms
    [commit] = transcribed
    assert [p.item_id for p in prepared] == [commit.item_id] * 2
    assert prepared[0].pcm16 != commit.pcm16
    assert commit.prepared and prepared[1].pcm16 == commit.pcm16
