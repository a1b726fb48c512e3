"""Issue 24: laughs tiny.en reads as words, or as one beat, resume the reply; /h/ words and real
interruptions said the same way still cut it; a real "hey" tiny.en hears no words in is no
murmur. Real Piper (at length scales 1.0 and 1.2:
`tests.fast_speech`) and espeak-ng audio, as a pause over a reply decides it
(`tests.test_asr.decision_audio`), through the person's real tiny.en transcriber with the
readings the server scores (`server.listening.backchannel.readings_to_score`), classified by
`server.listening.backchannel.classify` (rules 4 and 4c, `server.listening.murmurs`)."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from calibration.local_asr import LocalWhisperTranscriber, person_transcriber
from server.listening.backchannel import Decision, Verdict, classify, readings_to_score
from server.listening.murmurs import LAUGH_READINGS, MAX_LAUGH_CHANGE_DB
from tests import speech_fixtures
from tests.fast_speech import fast_speech
from tests.test_asr import decision_audio
from tests.test_backchannel_rooms import heard as heard_over_room
from tests.test_backchannel_sound_fit import read_as

RATE = speech_fixtures.RATE_HZ


@functools.cache
def transcriber() -> LocalWhisperTranscriber:
    """The person's transcriber as the server runs it (rules 4b and 4c's readings scored)."""
    asr = person_transcriber(readings=readings_to_score)
    asr.load()
    return asr


def said(text: str, spec: str) -> np.ndarray:
    """`text` by `spec`: "piper" (the voice's pace), "piper 1.2" (Piper at that length scale)
    or an espeak-ng voice."""
    if spec.startswith("piper "):
        return fast_speech(text, "piper", None, float(spec.split()[1]))
    if spec == "piper":
        return speech_fixtures.speech(text, "piper")
    return speech_fixtures.speech(text, "espeak", spec)


def decided(text: str, spec: str) -> Decision | None:
    """The decision on `text` said by `spec` over a reply, None when server VAD hears no
    speech in it."""
    try:
        pcm = decision_audio(said(text, spec))
    except AssertionError:
        return None
    return classify(transcriber().transcribe_blocking(pcm, RATE), pcm, RATE)


def test_piper_s_heh_heh_read_as_a_word_resumes_as_a_laugh() -> None:
    """Issue 24's example: Piper's "Heh heh." - two beats 30 ms apart, under the 40 ms of an
    /h/ between syllables - was read "ahead" and answered. Two beats joined by an /h/, one
    sound said twice, and whisper hears the laugh rather than "ahead", far above every
    interruption (rule 4c)."""
    decision = decided("Heh heh.", "piper")
    assert decision is not None and decision.verdict is Verdict.BACKCHANNEL, decision
    assert decision.rule == "laugh_reading", decision
    assert decision.reading in {reading.strip() for reading in LAUGH_READINGS}
    assert decision.prosody.gaps[0].duration_ms < 40
    assert decision.prosody.syllable_change_db <= MAX_LAUGH_CHANGE_DB


@pytest.mark.parametrize(("text", "spec"), [
    ("hee hee", "en-us+m3"), ("hee hee", "piper 1.2"), ("haha", "piper 1.2"),
    ("ha ha ha", "piper 1.2"), ("heh heh", "en-us+f2"), ("ha ha", "en-gb-scotland"),
    ("hehe", "en-us-nyc")])
def test_laughs_in_voices_not_tuned_on_resume(text: str, spec: str) -> None:
    """Laughs beside the benchmark's: espeak-ng en-us+m3's "hee hee" read "KK" (rule 4c);
    Piper's slow "hee hee" and "haha", one beat read "Hehe" and "Ha ha." (rule 4's one-beat
    laugh: a laugh's reading far above every interruption's; both cut before); the others
    read as laughs (two or three beats joined by an /h/) or as nothing (rule 4)."""
    decision = decided(text, spec)
    assert decision is not None and decision.verdict is Verdict.BACKCHANNEL, decision


@pytest.mark.parametrize(("text", "spec"), [
    ("hey", "piper"), ("hey", "en-us"), ("hey", "en-gb-x-rp"), ("hey", "en-us+f3"),
    ("hey", "en-029"), ("hey", "en-us+m3"), ("hey hey", "piper"), ("hey hey", "en-us"),
    ("hey hey", "en-029"), ("hang on", "piper"), ("hang on", "en-gb-scotland"),
    ("hang on", "en-us+f3"), ("hello", "piper"), ("hello", "en-029"), ("hi", "piper"),
    ("hi", "en-us+f3"), ("help", "en-029"), ("ahead", "piper"),
    ("anyhow", "piper"), ("anyhow", "en-us+f3"), ("hold on", "piper 1.2"),
    ("hey", "piper 1.2"), ("uh-uh", "en-us"), ("um, wait", "piper")])
def test_h_words_and_interruptions_are_no_laughs(text: str, spec: str) -> None:
    """/h/ words said alone and real interruptions - "hey" (tiny.en reads espeak-ng en-029's
    and "help" as "Okay." and "Hey"), "hey hey" (repeated beats with /h/), "hang on" (read
    "Hanyong", "Hanyo"), "ahead" (the word Piper's laugh was read as), "anyhow" (two beats
    with an /h/) - are never taken for laughter: whisper finds an interruption, or their
    words, likelier than any laugh, or their sound changes from beat to beat."""
    decision = decided(text, spec)
    assert decision is None or decision.verdict is Verdict.INTERRUPTION, decision


def test_a_hey_read_as_nothing_cuts() -> None:
    """espeak-ng en-gb-scotland's "hey" over a reply was read as no words (on an Intel MKL
    machine), and rule 4's `no_words` resumed the reply: a real interruption taken for a
    backchannel. Forced to read the audio, whisper finds "Hey." about as likely as any murmur
    or laugh: it cuts. Under `calibration.cpu_numerics` tiny.en reads it "Hey." (-2.20, every
    murmur and laugh within 0.1): it cuts as words; the empty reading is scored as the server
    would have scored it (`tests.test_backchannel_sound_fit.read_as`)."""
    heard = decided("hey", "en-gb-scotland")
    assert heard is not None and heard.verdict is Verdict.INTERRUPTION, heard
    decision = read_as("hey", "espeak", "en-gb-scotland", "")
    assert decision.words == (), decision
    assert (decision.verdict, decision.rule) == (Verdict.INTERRUPTION, "no_words_interruption")


@pytest.mark.parametrize(("text", "spec"), [
    ("heh", "en-gb-x-gbcwmd"), ("ha ha", "en-gb-x-gbcwmd"), ("haha", "en-gb-x-gbcwmd"),
    ("ha ha ha", "en-gb-x-gbcwmd"), ("heh heh", "en-us+f5"), ("hehe", "en-gb-scotland"),
    ("uh-huh", "en-us+f4")])
def test_laughs_and_murmurs_read_as_nothing_still_resume(text: str, spec: str) -> None:
    """Laughs and murmurs tiny.en hears no words in: every interruption's reading is far
    below a murmur's or a laugh's, and they resume the reply as before (`no_words`)."""
    decision = decided(text, spec)
    assert decision is not None and decision.words == (), decision
    assert decision.verdict is Verdict.BACKCHANNEL and decision.rule == "no_words", decision


@pytest.mark.parametrize(("kind", "seed"), [("babble", 0), ("tv", 0), ("babble", 1), ("tv", 1)])
def test_piper_s_uh_huh_over_a_room_read_as_words_resumes(kind: str, seed: int) -> None:
    """bench_backchannel's room grid: Piper's "uh huh" over babble and a TV at -45 dBFS was
    read "I had", "I have...", "I have to." and answered (3 of 3). Two alike syllables joined
    by an /h/, and whisper finds "Uh-huh." plausible beside those words: rule 4a."""
    transcript, pcm, room_dbfs = heard_over_room("uh huh", "piper", kind, -45, seed)
    decision = classify(transcript, pcm, RATE, room_dbfs=room_dbfs)
    assert decision.verdict is Verdict.BACKCHANNEL, (str(transcript), decision)


@pytest.mark.parametrize(("text", "spec"), [
    ("I have", "piper"), ("I have", "en-us"), ("I have", "en-gb-x-rp"), ("I had", "piper"),
    ("I had", "en-us"), ("a hug", "piper"), ("I hope", "piper"), ("I hid", "piper"),
    ("I have to", "piper"), ("uh, no", "piper"), ("uh, wait", "piper")])
def test_words_whisper_could_read_as_uh_huh_cut(text: str, spec: str) -> None:
    """The words Piper's "uh huh" was read as, said: whisper finds "Uh-huh." far less likely
    than them, or their syllables change: they cut the reply."""
    decision = decided(text, spec)
    assert decision is None or decision.verdict is Verdict.INTERRUPTION, decision
