"""Issue 24's kinds of backchannel, and real interruptions, through the real tiny.en: each
recording as a pause over a reply decides it (`tests.test_asr.decision_audio`), transcribed by
the person's transcriber and classified."""

from __future__ import annotations

import numpy as np
import pytest

from calibration.local_asr import person_transcriber
from server.listening.backchannel import Decision, Verdict, classify, readings_to_score
from tests import speech_fixtures
from tests.test_asr import decision_audio

RATE = speech_fixtures.RATE_HZ
VOICES = [("piper", None)] + [("espeak", voice) for voice in speech_fixtures.ESPEAK_VOICES]


def decided(text: str, engine: str, voice: str | None) -> Decision | None:
    """The decision on `text` said over a reply, None when server VAD hears no speech in it
    (Piper's "wait" is 178 ms: the reply plays on)."""
    try:
        pcm: np.ndarray = decision_audio(speech_fixtures.speech(text, engine, voice))
    except AssertionError:
        return None
    transcriber = person_transcriber(readings=readings_to_score)
    return classify(transcriber.transcribe_blocking(pcm, RATE), pcm, RATE)


@pytest.mark.parametrize(("text", "engine", "voice"), [
    ("mm-hmm", "espeak", "en-us"), ("mm", "espeak", "en-us"),
    ("ha ha ha ha", "piper", None), ("ha ha ha ha", "espeak", "en-us"),
    ("makes sense", "espeak", "en-us+f3"), ("gotcha", "espeak", "en-029"),
    ("perfect", "piper", None), ("thanks", "espeak", "en")])
def test_issue_24_murmurs_laughter_and_acknowledgments_resume(text: str, engine: str,
                                                              voice: str | None) -> None:
    """Issue 24's examples of the kind (a hum, "ha ha ha ha", "makes sense", "gotcha",
    "perfect", "thanks"), as the server hears them: each cut the reply and was answered.
    (Two-syllable hums tiny.en reads as words resume by rule 4a:
    `tests/test_backchannel_hums.py`; one-syllable ones - Piper's "mm" read "Amen.", its
    "mhm" "and make an" - are still answered. tiny.en's reading of a hum can change from run
    to run - espeak-ng en-gb-x-rp's "mm-hmm" read "M-M-M" and "And then boom." in one
    process -, so these examples are ones read the same in every run. espeak-ng en-gb-x-rp's
    "hmm" is not: its audio differs from take to take, and tiny.en read one take "That's.")"""
    decision = decided(text, engine, voice)
    assert decision is not None and decision.verdict is Verdict.BACKCHANNEL, decision


@pytest.mark.parametrize("text", ["stop", "wait", "no", "hold on", "hang on", "uh-uh",
                                  "what?", "how come?", "yeah but wait"])
def test_real_interruptions_are_never_backchannels(text: str) -> None:
    """In every voice, a real interruption (and a backchannel said with one) heard over a reply
    is never taken for a backchannel. (Open: tiny.en reads espeak-ng en's "why?" as "Right.",
    a backchannel word said level: it resumes.)"""
    decisions = [(voice, decided(text, engine, voice)) for engine, voice in VOICES]
    heard = [(voice, d) for voice, d in decisions if d is not None]
    assert len(heard) >= len(VOICES) - 1
    assert all(d.verdict is Verdict.INTERRUPTION for _, d in heard), heard


def test_an_acknowledgment_tiny_en_spells_as_letters_resumes_on_whisper_s_own_scores() -> None:
    """A tester's "oh I see" (espeak-ng en-gb-scotland) read "Y-T" was answered. No word was
    said; whisper, forced to read the audio as "Oh, I see.", finds that likelier than the
    letters, and every interruption's reading far less likely (rule 4b): it resumes. (Either
    of "Oh, I see." and "I see." is the right reading.)"""
    decision = decided("oh I see", "espeak", "en-gb-scotland")
    assert decision is not None and decision.verdict is Verdict.BACKCHANNEL, decision
    assert decision.words == ("y-t",) and decision.reading in ("Oh, I see.", "I see.")


@pytest.mark.parametrize(("text", "voice"), [
    ("coffee", "en-gb-scotland"), ("me too", "en-029"), ("name", "en-us+f2"),
    ("nothing", "en-us+m3"), ("kill", "en-gb-scotland"), ("nope", "en-gb-scotland"),
    ("yeah but wait", "en-029"), ("tonight", "en-gb-x-rp")])
def test_words_said_alone_and_misread_interruptions_are_not_taken_by_their_readings(
        text: str, voice: str) -> None:
    """Real words said alone over a reply, and interruptions, that tiny.en misreads ("copy",
    which whisper scores as likely as "Got it.", "meet all", "Build" for "nope", "8.0." for
    "yeah but wait"): never backchannels."""
    decision = decided(text, "espeak", voice)
    assert decision is None or decision.verdict is Verdict.INTERRUPTION, decision
