"""Issue 24: listed word acknowledgments said in more voices and paces resume, and the
interruptions that sound like them still cut. Real Piper (length scales 0.8-1.3) and
espeak-ng (fresh-process takes at 130-230 words a minute: `tests.fast_speech`) audio as a
pause over a reply decides it (`tests.test_asr.decision_audio`), through the person's real
tiny.en transcriber (rule 4b's readings scored) and `classify`.

Before: Piper's "okay", "I see", "perfect", "of course", "interesting" at length scale 0.8
(its "I see" at 1.0) were one voiced nucleus and cut as `sound_misfit`; espeak-ng's "yep"
and "yup" read "Yeah." were cut for their /p/'s release; Piper's "thank you.",
"interesting." were taken as questions (their last syllable steps up, then falls; its
"got it." at length scale 1.3, whose "it" rises, still is); Piper's "true" read "Truth.",
espeak-ng's "of course" read "I'm coarse.", "sounds good" read "Sound is good." were
answered. And espeak-ng's "enough", read "Yeah." at 130 and
230 words a minute with 140-160 ms of /f/, resumed."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from calibration.local_asr import person_transcriber
from server.listening.backchannel import Decision, Verdict, classify, readings_to_score
from server.listening.word_shape import measure
from tests import speech_fixtures
from tests.fast_speech import fast_speech
from tests.test_asr import decision_audio

RATE = speech_fixtures.RATE_HZ


@functools.cache
def _transcriber():
    """The person's transcriber as the server runs it (rule 4b's readings scored)."""
    return person_transcriber(readings=readings_to_score)


def heard(text: str, engine: str, voice: str | None, pace: float) -> np.ndarray:
    """`text` said at `pace` (`tests.fast_speech`) at -6 dBFS peak, as the pause over a reply
    decides it."""
    said = speech_fixtures.at_peak_dbfs(fast_speech(text, engine, voice, pace), -6.0)
    return decision_audio(said)


def decided(text: str, engine: str, voice: str | None, pace: float) -> tuple[str, Decision]:
    """tiny.en's transcript of `heard` and the decision on it."""
    pcm = heard(text, engine, voice, pace)
    transcript = _transcriber().transcribe_blocking(pcm, RATE)
    return str(transcript), classify(transcript, pcm, RATE)


@pytest.mark.parametrize(("text", "engine", "voice", "pace"), [
    ("okay", "piper", None, 0.8), ("I see", "piper", None, 0.8),
    ("perfect", "piper", None, 0.8), ("of course", "piper", None, 0.8),
    ("interesting", "piper", None, 0.8), ("I see", "piper", None, 1.0),
    ("yep", "espeak", "en-us", 175), ("yep", "espeak", "en-gb-x-rp", 175),
    ("yep", "espeak", "en-gb-scotland", 175), ("yup", "espeak", "en-us", 130),
    ("yep", "espeak", "en-us+m3", 150),
    ("thank you", "piper", None, 1.0), ("thank you", "piper", None, 0.8),
    ("interesting", "piper", None, 1.3),
    ("true", "piper", None, 0.8), ("true", "piper", None, 1.0),
    ("of course", "espeak", "en-gb-x-rp", 175), ("sounds good", "espeak", "en-us+m3", 150)])
def test_word_acknowledgments_in_more_voices_and_paces_resume(
        text: str, engine: str, voice: str | None, pace: float) -> None:
    """Each was cut and answered before (the module docstring): each resumes."""
    transcript, decision = decided(text, engine, voice, pace)
    assert decision.verdict is Verdict.BACKCHANNEL, (transcript, decision)


@pytest.mark.parametrize(("engine", "voice", "pace"), [
    ("espeak", "en-us", 130), ("espeak", "en-gb-x-rp", 230), ("espeak", "en-gb-x-rp", 175),
    ("espeak", "en-029", 175), ("espeak", "en-us+m3", 150), ("piper", None, 0.8),
    ("piper", None, 1.3)])
def test_enough_read_as_yeah_is_cut_by_its_fricative(engine: str, voice: str | None,
                                                     pace: float) -> None:
    """tiny.en read espeak-ng's "enough" "Yeah." at 130 (en-us) and 230 (en-gb-x-rp) words a
    minute with 140-160 ms of sound after the vowel, under the 180 ms the tail may hold: the
    reply resumed. Its /f/ is a fricative (high zero-crossing rate), which "yeah" never
    ends with: read "Yeah." in any of these voices it cuts; and as tiny.en reads it, it is an
    interruption."""
    pcm = heard("enough", engine, voice, pace)
    decision = classify("Yeah.", pcm, RATE)
    assert (decision.verdict, decision.rule) == (Verdict.INTERRUPTION, "sound_misfit")
    transcript, decision = decided("enough", engine, voice, pace)
    assert decision.verdict is Verdict.INTERRUPTION, (transcript, decision)


@pytest.mark.parametrize(("engine", "voice", "pace"), [
    ("piper", None, 0.8), ("piper", None, 1.0), ("piper", None, 1.3), ("espeak", "en-us", 175),
    ("espeak", "en-029", 175), ("espeak", "en-gb-x-rp", 230), ("espeak", "en-us+f3", 175),
    ("espeak", "en-us+m3", 150), ("espeak", "en-gb-scotland", 175)])
@pytest.mark.parametrize("text", ["pause", "hey", "stop", "wait", "no", "nope"])
def test_one_syllable_interruptions_are_one_vowel_beat(text: str, engine: str,
                                                        voice: str | None, pace: float) -> None:
    """A one-syllable interruption read as a two-beat acknowledgment ("Of course." for
    Piper's "pause", "Okay." for espeak-ng en-029's "hey") is cut because it is one vowel beat,
    in every voice and pace: the beats that let Piper's quick "okay" resume never split
    them."""
    pcm = heard(text, engine, voice, pace)
    assert len(measure(pcm, RATE).beats) == 1
    for misread in ("Okay.", "Of course.", "Perfect."):
        decision = classify(misread, pcm, RATE)
        assert (decision.verdict, decision.rule) == (Verdict.INTERRUPTION, "sound_misfit")


@pytest.mark.parametrize(("text", "engine", "voice", "pace"), [
    ("No.", "piper", None, 0.8), ("Nope.", "piper", None, 1.3), ("Wait.", "espeak", "en-us", 130),
    ("Stop.", "espeak", "en-gb-x-rp", 230), ("Enough.", "espeak", "en-us", 130),
    ("Enough.", "espeak", "en-gb-x-rp", 230), ("Hey.", "espeak", "en-029", 175),
    ("Hey.", "espeak", "en-gb-x-rp", 230), ("Pause.", "piper", None, 0.8),
    ("Sorry.", "espeak", "en-us+f3", 230), ("What?", "piper", None, 1.0),
    ("Sure?", "espeak", "en-us+f3", 175), ("Sure?", "espeak", "en-gb-x-rp", 175),
    ("Really?", "espeak", "en-us", 175), ("Hold on.", "espeak", "en-us+m3", 150),
    ("Yeah but wait.", "piper", None, 1.0)])
def test_interruptions_that_sound_like_acknowledgments_cut(
        text: str, engine: str, voice: str | None, pace: float) -> None:
    """Real interruptions and questions in the same voices and paces: never backchannels.
    (Yes/no questions said level - Piper's "okay?", "sure?", espeak-ng en-gb-x-rp's "yeah?" -
    are read without a question mark and sound like the statement: they resume.)"""
    transcript, decision = decided(text, engine, voice, pace)
    assert decision.verdict is Verdict.INTERRUPTION, (transcript, decision)


@pytest.mark.parametrize(("engine", "voice", "pace"), [
    ("espeak", "en-us", 175), ("piper", None, 1.0)])
def test_it_makes_sense_is_an_acknowledgment(engine: str, voice: str | None,
                                             pace: float) -> None:
    """bench_backchannel's espeak-ng en-us "makes sense" over babble at -45 dBFS was read "it
    makes sense." and answered ("it" was no listed word); said so, it is one."""
    pcm = heard("it makes sense", engine, voice, pace)
    decision = classify("It makes sense.", pcm, RATE)
    assert (decision.verdict, decision.rule) == (Verdict.BACKCHANNEL, "backchannel_words")
    transcript, decision = decided("it makes sense", engine, voice, pace)
    assert decision.verdict is Verdict.BACKCHANNEL, (transcript, decision)
