"""Pause, then decide, over the protocol: a real server, server VAD on generated speech, a
client that plays, pauses and resumes like the page (`tests.pausing_page`)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from server.listening.room_floor import LEAD_MS
from server.listening.server_vad_settings import DECISION_TAIL_MS
from tests import speech_fixtures
from tests.pausing_page import mic_pcm16, receive_while, speak_over_reply, stream_mic
from tests.realtime_client import RealtimeClient
from tests.test_server_vad import CountingTranscriber

SETTINGS_REPLY = "say: First, open the settings app. Then tap on Wi-Fi and choose your network."
PATIENT = {"pause_timeout_ms": 20000}
"""A pause timeout longer than any transcription on a loaded CI machine: the words decide."""


async def test_uh_huh_over_a_reply_resumes_it_and_is_not_a_turn(start_server) -> None:
    """Issue 13's failing example: espeak-ng "uh-huh" (392 ms) 900 ms into playback, then
    silence; later "what next?". The reply pauses, resumes where it stopped, plays to its end
    and stays whole in history; "uh-huh" is never a turn; "what next?" is the next turn."""
    server = await start_server(tts="uniform", calibration="marks", lead_ms=400)
    uh_huh = speech_fixtures.speech("uh-huh", "espeak", "en-us")
    what_next = speech_fixtures.speech("What next?", "espeak", "en-us")
    mic = np.concatenate([speech_fixtures.silence(900), uh_huh, speech_fixtures.silence(2000)])
    later = np.concatenate([what_next, speech_fixtures.silence(1500)])
    async with RealtimeClient.connect(server.ws_url) as client:
        outcome = await speak_over_reply(client, SETTINGS_REPLY, mic, PATIENT)
        await receive_while(client, asyncio.create_task(stream_mic(client, mic_pcm16(later))))
        created = await client.wait_for("response.created",
                                        lambda e: e["response"]["id"] != outcome.response_id,
                                        timeout=30)
        await client.wait_for("response.output_audio.delta",
                              lambda e: e["response_id"] == created["response"]["id"])
    assert [e["reason"] for e in outcome.paused] == ["speech_started"]
    assert [e["reason"] for e in outcome.resumed] == ["backchannel"]
    assert outcome.paused[0]["audio_end_ms"] <= outcome.resumed[0]["audio_end_ms"]
    assert outcome.resumed[0]["audio_end_ms"] < 1800, "resumed where it paused, near 900 ms"
    assert outcome.status == "completed"
    assert outcome.heard == SETTINGS_REPLY.removeprefix("say: ")
    assert len(outcome.backchannels) == 1
    transcripts = client.of_type("conversation.item.input_audio_transcription.completed")
    assert len(transcripts) == 1 and "next" in transcripts[0]["transcript"].lower()
    turns = [(t.role, t.text, t.interrupted) for t in server.responder.prompts[-1].turns]
    assert turns == [("user", SETTINGS_REPLY, False),
                     ("assistant", SETTINGS_REPLY.removeprefix("say: "), False),
                     ("user", transcripts[0]["transcript"], False)]


@pytest.mark.parametrize(("text", "engine", "voice", "rule"), [
    ("ha ha ha ha", "espeak", "en-us", "laughter"), ("makes sense", "piper", None,
                                                     "backchannel_words")])
async def test_laughter_and_an_acknowledgment_over_a_reply_resume_it(
        start_server, text: str, engine: str, voice: str | None, rule: str) -> None:
    """Issue 24: "ha ha ha ha" over a reply cut it and the laugh was answered, and "makes
    sense" was not on the list. Both resume the reply where it paused, it plays to its end,
    whole in history, and neither is a turn."""
    server = await start_server(tts="uniform", calibration="marks", lead_ms=400)
    said = speech_fixtures.speech(text, engine, voice)
    mic = np.concatenate([speech_fixtures.silence(900), said, speech_fixtures.silence(2500)])
    async with RealtimeClient.connect(server.ws_url) as client:
        outcome = await speak_over_reply(client, SETTINGS_REPLY, mic, PATIENT)
    assert [e["reason"] for e in outcome.resumed] == ["backchannel"]
    assert [e["rule"] for e in outcome.backchannels] == [rule]
    assert outcome.status == "completed"
    assert outcome.heard == SETTINGS_REPLY.removeprefix("say: ")
    assert client.of_type("input_audio_buffer.committed") == []
    assert client.of_type("conversation.item.input_audio_transcription.completed") == []


SHORT_INTERRUPTIONS = [("wait", "espeak", "en-us", "wait"),
                       ("how come?", "espeak", "en-us", "com")]
"""Real interruptions, and a part of the transcript each must have ("how come?" is read "Hot
comb.", which sounds like an /h/ murmur and once resumed the reply). Piper's "wait" (178 ms)
and "no" (222 ms) are shorter than server VAD's 250 ms minimum speech, and the reply plays on
over them (open: a shorter minimum while a reply plays made the page's barge-in over a Piper
echo time out)."""


@pytest.mark.parametrize(("word", "engine", "voice", "read_as"), SHORT_INTERRUPTIONS)
async def test_wait_over_a_reply_cuts_it_at_the_paused_position(
        start_server, word: str, engine: str, voice: str | None, read_as: str) -> None:
    """A real interruption ("wait", "no") pauses the reply, then cuts it where it paused and is
    answered: the heard text ends at the paused position, the next prompt sees the word."""
    server = await start_server(tts="uniform", calibration="marks", lead_ms=400)
    wait = speech_fixtures.speech(word, engine, voice)
    mic = np.concatenate([speech_fixtures.silence(1300), wait, speech_fixtures.silence(2500)])
    async with RealtimeClient.connect(server.ws_url) as client:
        outcome = await speak_over_reply(client, SETTINGS_REPLY, mic, PATIENT)
        transcript = await client.wait_for(
            "conversation.item.input_audio_transcription.completed", timeout=30)
        created = await client.wait_for("response.created",
                                        lambda e: e["response"]["id"] != outcome.response_id,
                                        timeout=30)
        await client.wait_for("response.output_audio.delta",
                              lambda e: e["response_id"] == created["response"]["id"])
    assert [e["reason"] for e in outcome.paused] == ["speech_started"]
    assert outcome.resumed == [] and outcome.backchannels == []
    assert outcome.status == "cancelled"
    cleared = client.of_type("output_audio_buffer.cleared", response_id=outcome.response_id)
    assert cleared[0]["reason"] == "interruption"
    words = SETTINGS_REPLY.removeprefix("say: ").split()
    assert outcome.paused[0]["audio_end_ms"] <= outcome.played_ms
    assert outcome.heard == " ".join(words[: outcome.played_ms // 400])
    assert read_as in transcript["transcript"].lower()
    turns = [(t.role, t.text, t.interrupted) for t in server.responder.prompts[-1].turns]
    assert turns[-2:] == [("assistant", outcome.heard, True),
                          ("user", transcript["transcript"], False)]


async def test_interruption_mode_cancel_keeps_cancelling_at_once(start_server) -> None:
    """`session.interruption.mode = "cancel"`: speech cancels the reply with no pause."""
    server = await start_server(tts="uniform", calibration="marks", lead_ms=400)
    uh_huh = speech_fixtures.speech("uh-huh", "espeak", "en-us")
    mic = np.concatenate([speech_fixtures.silence(900), uh_huh, speech_fixtures.silence(2000)])
    async with RealtimeClient.connect(server.ws_url) as client:
        outcome = await speak_over_reply(client, SETTINGS_REPLY, mic, {"mode": "cancel"})
        updated = client.of_type("session.updated")[-1]
    assert updated["session"]["interruption"]["mode"] == "cancel"
    assert outcome.paused == [] and outcome.status == "cancelled"


@pytest.mark.parametrize(("word", "kind"), [("uh-huh", "backchannel"), ("wait", "interruption")])
async def test_the_decision_hears_the_speech_and_the_decision_tail_only(
        start_server, word: str, kind: str) -> None:
    """The real tiny.en decides from the turn's audio up to `DECISION_TAIL_MS` after its
    speech (server VAD's gap), not the 300 ms utterance tail: each word is transcribed once,
    on that audio. "uh-huh" resumes the reply and is never committed; "wait" cuts it, and its
    turn is committed with the whole `UTTERANCE_TAIL_MS` and keeps the decision's words
    (nothing sounds after the decision's audio), which the answer's prompt sees. Over a
    learned room (here the digitally silent floor) the decision's audio gets up to
    `room_floor.LEAD_MS` of silence in front of the person (`room_floor.trim_room`)."""
    transcriber = CountingTranscriber()
    await asyncio.to_thread(transcriber.inner.load)
    server = await start_server(tts="uniform", calibration="marks", lead_ms=400,
                                input_transcriber=transcriber)
    speech = speech_fixtures.speech(word, "espeak", "en-us")
    mic = np.concatenate([speech_fixtures.silence(900), speech, speech_fixtures.silence(2500)])
    async with RealtimeClient.connect(server.ws_url) as client:
        outcome = await speak_over_reply(client, SETTINGS_REPLY, mic, PATIENT)
        if kind == "interruption":
            await client.wait_for("conversation.item.input_audio_transcription.completed",
                                  timeout=30)
            await client.wait_for("response.created",
                                  lambda e: e["response"]["id"] != outcome.response_id,
                                  timeout=30)
    [started] = client.of_type("input_audio_buffer.speech_started")
    [stopped] = client.of_type("input_audio_buffer.speech_stopped")
    speech_ms = stopped["audio_end_ms"] - started["audio_start_ms"]
    [heard_ms] = transcriber.calls
    lead_in_ms = heard_ms - (speech_ms + DECISION_TAIL_MS)
    assert -1 <= lead_in_ms <= LEAD_MS  # silence put before the person over a learned room
    if kind == "backchannel":
        assert [e["reason"] for e in outcome.resumed] == ["backchannel"]
        assert client.of_type("input_audio_buffer.committed") == []
        return
    assert outcome.status == "cancelled" and outcome.resumed == []
    [transcript] = client.of_type("conversation.item.input_audio_transcription.completed")
    assert "wait" in transcript["transcript"].lower()
    assert server.responder.prompts[-1].turns[-1].text == transcript["transcript"]
