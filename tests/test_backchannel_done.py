"""A backchannel resumes the reply only when the person is done (`server.realtime.pauses`:
`RESUME_SILENCE_MS`), over the protocol: a real server on loopback, server VAD (Silero) and the
real tiny.en on espeak-ng and Piper speech, a client that plays, pauses and resumes like the
page (`tests.pausing_page`)."""

from __future__ import annotations

import numpy as np
import pytest

from server.realtime.pauses import RESUME_SILENCE_MS
from tests import speech_fixtures
from tests.pausing_page import cut_over_reply, speak_over_reply
from tests.realtime_client import RealtimeClient

REPLY = "say: First, open the settings app. Then tap on Wi-Fi and choose your network."
WORDS = REPLY.removeprefix("say: ").split()
WORD_MS = 400
"""The uniform test voice's word length (ms)."""
PATIENT = {"pause_timeout_ms": 20000}


def said(text: str, engine: str, voice: str | None) -> np.ndarray:
    """`text` in the voice, 16 kHz float."""
    return speech_fixtures.speech(text, engine, voice)


def then_after(first: np.ndarray, gap_ms: float, second: np.ndarray) -> np.ndarray:
    """`first`, `gap_ms` of silence between the sound of the two, then `second` (the voices'
    own silence around each trimmed away: Piper's "yeah" ends with 150 ms of it)."""
    end = round(speech_fixtures.active_span_ms(first)[1] * speech_fixtures.RATE_HZ / 1000)
    start = round(speech_fixtures.active_span_ms(second)[0] * speech_fixtures.RATE_HZ / 1000)
    return np.concatenate([first[:end], speech_fixtures.silence(gap_ms), second[start:]])


@pytest.mark.parametrize(("first", "then", "engine", "voice", "gap_ms"), [
    ("Okay. Stop.", None, "espeak", "en-us+m3", None),
    ("Okay. Stop.", None, "espeak", "en-gb-scotland", None),
    ("Right. No.", None, "espeak", "en-gb-scotland", None),
    ("yeah", "wait", "piper", None, 350),
    ("okay", "stop", "espeak", "en-us+f3", 420),
    ("sure", "stop", "espeak", "en-029", 420),
])
async def test_a_backchannel_then_an_interruption_never_resumes_the_reply(
        start_server, first: str, then: str | None, engine: str, voice: str | None,
        gap_ms: int | None) -> None:
    """A tester's "Okay. Stop." (espeak-ng, a 420 ms pause between the words) 900 ms into a
    reply: the reply resumed for 0.8 s on "Okay", then "Stop" cut it, and the history grew by
    the words played in between. The person was not done: the reply stays paused through the
    pause and is cut where it paused; its heard text ends there. (Piper's "yeah", 350 ms of
    silence between the sounds, "wait": the same kind in another voice; en-us+f3 "okay" and
    en-029 "sure", 420 ms, "stop": server VAD's turn ended before Silero called the /s/
    speech, and the reply resumed between the words before `server.listening.
    quiet_after_speech` heard its onset.)"""
    server = await start_server(tts="uniform", calibration="marks", lead_ms=400)
    speech = said(first, engine, voice)
    if then is not None and gap_ms is not None:
        speech = then_after(speech, gap_ms, said(then, engine, voice))
    mic = np.concatenate([speech_fixtures.silence(900), speech, speech_fixtures.silence(2500)])
    outcome = await cut_over_reply(server.ws_url, REPLY, mic, PATIENT)
    assert outcome.heard == " ".join(WORDS[: outcome.played_ms // WORD_MS])


async def test_speech_after_a_resumed_backchannel_pauses_again_and_the_cut_keeps_what_played(
        start_server) -> None:
    """"Okay.", then a pause of 2 s (longer than `RESUME_SILENCE_MS`, and than the
    decision's transcription on a loaded machine), then "Stop.": the reply resumes after
    "Okay" (the person was done, by the rule), pauses again the moment "Stop" is heard, and
    is cut there. The heard text is exactly the words the client played, those after the
    resume included: calibration claims no more and no less."""
    server = await start_server(tts="uniform", calibration="marks", lead_ms=400)
    okay = said("Okay.", "espeak", "en-us+m3")
    stop = said("Stop.", "espeak", "en-us+m3")
    mic = np.concatenate([speech_fixtures.silence(900),
                          then_after(okay, RESUME_SILENCE_MS + 1500, stop),
                          speech_fixtures.silence(2500)])
    async with RealtimeClient.connect(server.ws_url) as client:
        outcome = await speak_over_reply(
            client, REPLY, mic, PATIENT | {"max_backchannel_ms": 1500})
        await client.wait_for("conversation.item.input_audio_transcription.completed",
                              timeout=30)
    assert [e["reason"] for e in outcome.resumed] == ["backchannel"]
    assert [e["reason"] for e in outcome.paused] == ["speech_started"] * 2
    assert outcome.status == "cancelled"
    assert outcome.played_ms > outcome.resumed[0]["audio_end_ms"]
    assert outcome.heard == " ".join(WORDS[: outcome.played_ms // WORD_MS])
    turns = [(t.role, t.text, t.interrupted) for t in server.responder.prompts[-1].turns]
    assert turns[-2][:2] == ("assistant", outcome.heard) and turns[-2][2]


@pytest.mark.parametrize(("text", "voice"), [("hee", "en-029"), ("sure thing", "en-us+m3")])
async def test_a_one_syllable_laugh_and_sure_thing_resume_the_reply(
        start_server, text: str, voice: str) -> None:
    """A tester's one-syllable laugh, read "Hee!" / "Hee" by tiny.en, cut the reply and was
    answered ("one syllable of a vowel" was taken for the "uh" of "uh-uh"); "sure thing" was
    not on the list. Both resume the reply, which plays to its end, whole in history.
    (en-gb-scotland's "hee" is cut: whisper finds "Hey." about as likely, as for its "hey" read
    "Hee.": `server.listening.backchannel_readings`.)"""
    server = await start_server(tts="uniform", calibration="marks", lead_ms=400)
    await assert_resumed_to_the_end(server.ws_url, said(text, "espeak", voice))


async def assert_resumed_to_the_end(ws_url: str, speech: np.ndarray) -> None:
    """`speech` (16 kHz float) 900 ms into the reply resumes it as a backchannel: it plays to
    its end, whole in history, and nothing is transcribed (no turn, no answer)."""
    mic = np.concatenate([speech_fixtures.silence(900), speech, speech_fixtures.silence(2500)])
    async with RealtimeClient.connect(ws_url) as client:
        outcome = await speak_over_reply(client, REPLY, mic, PATIENT)
    assert [e["reason"] for e in outcome.resumed] == ["backchannel"], outcome.backchannels
    assert outcome.status == "completed"
    assert outcome.heard == " ".join(WORDS)
    assert client.of_type("conversation.item.input_audio_transcription.completed") == []
