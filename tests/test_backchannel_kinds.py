"""Issue 24's kinds of backchannel, and real interruptions, through the real tiny.en: each
recording as a pause over a reply decides it (`tests.test_asr.decision_audio`), transcribed by
the person's transcriber and classified."""

from __future__ import annotations

import numpy as np
import pytest

from calibration.local_asr import person_transcriber
from server.listening.backchannel import Decision, Verdict, classify
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
    return classify(person_transcriber().transcribe_blocking(pcm, RATE), pcm, RATE)


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
