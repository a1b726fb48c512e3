"""Issue 24: hums tiny.en writes as words ("And then boom.", "It may end time.", "In a game.")
resume the reply when whisper itself finds a hum reading plausible and the sound is a murmur
(rule 4a of `server.listening.backchannel`); nasal words whisper also finds hum-like ("mom",
"name", "nine", "and then") stay interruptions. Real espeak-ng and Piper audio, as a pause over
a reply decides it (`tests.test_asr.decision_audio`), through the person's real tiny.en
transcriber (`calibration.local_asr.person_transcriber`), which scores the hum readings
(`calibration.asr_readings`)."""

from __future__ import annotations

import numpy as np
import pytest

from calibration.asr import Transcript
from calibration.asr_readings import MAX_SCORED_S, MURMUR_READINGS
from calibration.local_asr import person_transcriber
from server.listening.backchannel import MAX_REPEAT_CHANGE_DB, Decision, Verdict, classify
from server.listening.prosody import analyse
from tests import speech_fixtures
from tests.pausing_page import speak_over_reply
from tests.realtime_client import RealtimeClient
from tests.test_asr import decision_audio

RATE = speech_fixtures.RATE_HZ
SETTINGS_REPLY = "say: First, open the settings app. Then tap on Wi-Fi and choose your network."


def heard(text: str, engine: str, voice: str | None) -> tuple[Transcript, np.ndarray]:
    """`text` said over a reply: the decision's audio and its transcript."""
    pcm = decision_audio(speech_fixtures.speech(text, engine, voice))
    return person_transcriber().transcribe_blocking(pcm, RATE), pcm


def decided(text: str, engine: str, voice: str | None) -> Decision:
    transcript, pcm = heard(text, engine, voice)
    return classify(transcript, pcm, RATE)


@pytest.mark.parametrize(("text", "voice"), [
    ("mm-hmm", "en-gb-x-rp"), ("mm-hmm", "en-029"), ("mhm", "en-029"), ("mhm", "en-us+f3"),
    ("mhm", "en-gb-x-rp")])
def test_a_hum_read_as_words_resumes(text: str, voice: str) -> None:
    """bench_backchannel's hums that were answered: tiny.en read espeak-ng en-gb-x-rp's
    "mm-hmm" "And then boom.", en-029's "It may end time.", en-029's "mhm" "In a game.",
    en-us+f3's "M.A. Kim.", en-gb-x-rp's "mhm" "And again" (a never-word, less likely to
    whisper than the hum; its reading of a hum changes from run to run: some runs write a
    hum, which rule 4 takes). Each is a backchannel now; rule 4a's when read as words."""
    transcript, pcm = heard(text, "espeak", voice)
    decision = classify(transcript, pcm, RATE)
    assert decision.verdict is Verdict.BACKCHANNEL, (str(transcript), decision)
    assert transcript.murmur is not None
    if decision.rule == "hum_reading":
        assert decision.reading in {reading.strip() for reading in MURMUR_READINGS}
        assert decision.prosody.syllable_change_db <= MAX_REPEAT_CHANGE_DB


@pytest.mark.parametrize(("text", "engine", "voice"), [
    ("mom", "piper", None), ("mom", "espeak", "en-us"), ("mom", "espeak", "en-gb-x-rp"),
    ("mom", "espeak", "en-029"), ("name", "espeak", "en-us"), ("name", "espeak", "en-gb-x-rp"),
    ("nine", "espeak", "en-us"), ("nine", "espeak", "en-gb-x-rp"), ("many", "espeak", "en-us"),
    ("Emma", "espeak", "en-gb-x-rp"), ("him", "espeak", "en-us+f3"),
    ("and then", "espeak", "en-gb-x-rp"), ("me too", "espeak", "en-029"),
    ("me too", "espeak", "en-us+f3"), ("hold on", "piper", None), ("hang on", "espeak", "en-029"),
    ("how come?", "espeak", "en-us"), ("anyhow", "espeak", "en-us+f3")])
def test_nasal_words_whisper_finds_hum_like_are_interruptions(text: str, engine: str,
                                                              voice: str | None) -> None:
    """Words with nasals and /h/ whose hum reading tiny.en finds about as likely as its words
    (offline, these resumed the reply under a rule that trusted the reading alone): one
    syllable is never a hum read as words, and two syllables must repeat one sound."""
    decision = decided(text, engine, voice)
    assert decision.verdict is Verdict.INTERRUPTION, decision


def test_a_murmur_repeats_one_sound_and_words_change_it() -> None:
    """`Prosody.syllable_change_db` on espeak-ng en-us: "mm-hmm", "uh-huh" and "ha ha" repeat
    one sound; "okay", "perfect" and "let me" change it."""
    def change(text: str) -> float:
        return analyse(speech_fixtures.speech(text, "espeak", "en-us"), RATE).syllable_change_db

    for murmur in ("mm-hmm", "uh-huh", "ha ha"):
        assert change(murmur) <= MAX_REPEAT_CHANGE_DB, murmur
    for words in ("okay", "perfect", "let me"):
        assert change(words) > MAX_REPEAT_CHANGE_DB, words
    assert analyse(speech_fixtures.speech("mm", "espeak", "en-us"), RATE).syllable_change_db == 0


def test_hum_readings_are_scored_for_short_audio_only() -> None:
    """The transcript of a short utterance carries its scores: a clear "thanks" is far likelier
    than any hum reading; audio longer than `MAX_SCORED_S` is not scored."""
    transcript, _ = heard("thanks", "piper", None)
    assert transcript.murmur is not None
    assert transcript.murmur.text_logprob > transcript.murmur.murmur_logprob + 1.0
    long = np.concatenate([speech_fixtures.speech("Tell me about the weather in Paris.", "piper"),
                           speech_fixtures.silence(300)])
    assert long.size > MAX_SCORED_S * RATE
    assert person_transcriber().transcribe_blocking(long, RATE).murmur is None


async def test_a_hum_read_as_words_over_a_reply_resumes_it(start_server) -> None:
    """Through the real server (server VAD, the in-process tiny.en): espeak-ng en-029's
    "mm-hmm" 900 ms into a reply, read as words by tiny.en, resumes it where it paused; it
    plays to its end, whole in history, and the hum is never a turn."""
    server = await start_server(tts="uniform", calibration="marks", lead_ms=400)
    hum = speech_fixtures.speech("mm-hmm", "espeak", "en-029")
    mic = np.concatenate([speech_fixtures.silence(900), hum, speech_fixtures.silence(2500)])
    async with RealtimeClient.connect(server.ws_url) as client:
        outcome = await speak_over_reply(client, SETTINGS_REPLY, mic, {"pause_timeout_ms": 20000})
    assert [e["reason"] for e in outcome.resumed] == ["backchannel"], (
        outcome, client.of_type("conversation.item.input_audio_transcription.completed"),
        client.of_type("output_audio_buffer.cleared"))
    assert outcome.status == "completed"
    assert outcome.heard == SETTINGS_REPLY.removeprefix("say: ")
    assert client.of_type("input_audio_buffer.committed") == []
    assert client.of_type("conversation.item.input_audio_transcription.completed") == []
