"""The backchannel classifier and the prosody it measures, on espeak-ng and Piper speech."""

from __future__ import annotations

import numpy as np
import pytest

from server.listening.backchannel import (
    QUESTION_RISE_ST,
    VOCABULARIES,
    Verdict,
    classify,
    normalise,
)
from server.listening.prosody import analyse
from tests import speech_fixtures

RATE = speech_fixtures.RATE_HZ
ESPEAK = ("en-us", "en", "en-gb-x-rp", "en-us+f3", "en-029")


def said(text: str, engine: str = "espeak", voice: str | None = "en-us") -> np.ndarray:
    """`text` spoken, with the margins a committed turn has (300 ms before and after)."""
    return speech_fixtures.place(speech_fixtures.speech(text, engine, voice), 300, 300)


def test_normalise_strips_punctuation_and_case() -> None:
    assert normalise("Uh-uh.") == ("uh-uh",)
    assert normalise("  I see, right\u2019s ") == ("i", "see", "right's")
    assert normalise("...") == ()


@pytest.mark.parametrize("word", ["no", "wait", "stop", "hold on", "nope", "nuh-uh"])
def test_never_words_are_never_backchannels_whatever_the_sound(word: str) -> None:
    """Rule 2 beats everything, even the sound of a perfect "uh-huh". ("uh-uh" is written by
    the ASR for "uh-huh" too: its sound decides, see the next test.)"""
    uh_huh = said("uh-huh")
    for transcript in (word, f"{word.capitalize()}.", f"yeah {word}"):
        decision = classify(transcript, uh_huh, RATE)
        assert (decision.verdict, decision.rule) == (Verdict.INTERRUPTION, "never_word")


@pytest.mark.parametrize("voice", ESPEAK)
def test_uh_huh_and_uh_uh_both_read_uh_uh_and_the_h_decides(voice: str) -> None:
    """tiny.en writes "Uh-uh." for espeak-ng's "uh-huh": the aspirated gap tells them apart.

    Five renditions of each: espeak-ng's breath noise (the en-us+f3 variant) differs from call
    to call within a process, and seeding libc's rand does not fix it. Measured: 19 of 20 f3
    "uh-huh" read murmur_h (the other, murmur_closure, is taken for an interruption: the safe
    side), 20 of 20 in the other voices; every "uh-uh" an interruption. One fresh-clone CI run
    drew the odd one when the test took a single rendition.
    """
    yes = [classify("Uh-uh.", said("uh-huh", voice=voice), RATE) for _ in range(5)]
    no = [classify("Uh-uh.", said("uh-uh", voice=voice), RATE) for _ in range(5)]
    assert sum((d.verdict, d.rule) == (Verdict.BACKCHANNEL, "murmur_h") for d in yes) >= 3, yes
    assert all((d.verdict, d.rule) == (Verdict.INTERRUPTION, "murmur_closure") for d in no), no


def test_a_lone_interjection_is_decided_by_its_sound() -> None:
    """tiny.en writes "Oh" for espeak-ng en-029's "uh-uh" (bench_backchannel, quiet machine):
    "oh" and "ah" alone say nothing the sound does not, so "uh-uh" stays an interruption and
    "uh-huh" a backchannel; beside a backchannel word they go with it."""
    for transcript in ("Oh", "Ah."):
        no = classify(transcript, said("uh-uh", voice="en-029"), RATE)
        yes = classify(transcript, said("uh-huh", voice="en-029"), RATE)
        assert (no.verdict, no.rule) == (Verdict.INTERRUPTION, "murmur_closure")
        assert (yes.verdict, yes.rule) == (Verdict.BACKCHANNEL, "murmur_h")
    for transcript, text in (("Oh, okay.", "oh okay"), ("Ah, I see.", "ah I see")):
        decision = classify(transcript, said(text), RATE)
        assert (decision.verdict, decision.rule) == (Verdict.BACKCHANNEL, "backchannel_words")


def test_two_syllables_split_by_a_closure_are_not_a_backchannel() -> None:
    """Piper "uh, uh." (a glottal closure between the syllables), read "Uh-huh." by tiny.en."""
    decision = classify("Uh-huh.", said("uh, uh.", "piper", None), RATE)
    assert decision.verdict is Verdict.INTERRUPTION
    gap = decision.prosody.gaps[0]
    assert not gap.aspirated


@pytest.mark.parametrize(("text", "transcript"), [("yeah", "Yeah."), ("right", "Right."),
                                                  ("okay", "Okay."), ("I see", "I see.")])
def test_backchannel_words_resume(text: str, transcript: str) -> None:
    decision = classify(transcript, said(text), RATE)
    assert (decision.verdict, decision.rule) == (Verdict.BACKCHANNEL, "backchannel_words")


@pytest.mark.parametrize(("text", "transcript"), [("right?", "Right?"), ("okay?", "Okay?"),
                                                  ("yeah?", "Yeah?"), ("really?", "Really?")])
def test_backchannel_words_asked_as_a_question_are_an_interruption(text: str,
                                                                    transcript: str) -> None:
    """A tester's kind: "right?", "okay?", "yeah?", "really?" over a reply resumed it as
    backchannels in every voice, though tiny.en wrote the question mark: they ask for an
    answer."""
    decision = classify(transcript, said(text), RATE)
    assert (decision.verdict, decision.rule) == (Verdict.INTERRUPTION, "question")


@pytest.mark.parametrize(("text", "transcript"), [
    ("how come", "Hot comb."), ("how so", "House O."), ("he said what", "He's bad work."),
    ("let me", "Let me..."), ("I hope", "I hope."), ("anyhow", "Anyhow."), ("is it", "Is it?"),
    ("mm-hmm", "And then boom.")])
def test_words_are_never_overruled_by_a_murmur_like_sound(text: str, transcript: str) -> None:
    """What tiny.en wrote for these (a tester's "how come?" over a reply was read "Hot comb.",
    "he said what?" "He's bad work.") sounds, in most voices, like two syllables joined by an
    /h/, the sound of "uh-huh": the words decide, and any words outside the backchannel and
    murmur lists are an interruption, in every voice, when the transcript carries no hum
    readings from the recogniser (rule 5; with them, rule 4a takes a hum misread as words:
    `tests/test_backchannel_hums.py`)."""
    voices = [("espeak", voice) for voice in ESPEAK] + [("piper", None)]
    for engine, voice in voices:
        decision = classify(transcript, said(text, engine, voice), RATE)
        assert (decision.verdict, decision.rule) == (Verdict.INTERRUPTION, "other_words"), voice


def test_length_and_word_count_limit_a_backchannel() -> None:
    long_yes = said("yeah, yeah, right, okay, I see, yeah")
    assert classify("Yeah, yeah, right, okay.", long_yes, RATE).rule == "too_long"
    assert classify("Yeah.", said("yeah"), RATE, max_ms=150).rule == "too_long"


def test_silence_and_a_cough_with_no_words_are_noise() -> None:
    rng = np.random.default_rng(3)
    cough = speech_fixtures.place(speech_fixtures.cough(rng, 250, -10.0), 300, 300)
    assert classify("", cough, RATE).verdict is Verdict.NOISE
    assert classify("", speech_fixtures.silence(500), RATE).verdict is Verdict.NOISE


def test_vocabularies_keep_never_words_apart_from_backchannels() -> None:
    for vocabulary in VOCABULARIES.values():
        assert not vocabulary.never & (vocabulary.backchannels | vocabulary.murmurs
                                       | vocabulary.interjections)
        assert not vocabulary.interjections & (vocabulary.backchannels | vocabulary.murmurs)
        assert {"uh-uh", "uh-huh", "mm-hmm"} <= vocabulary.murmurs
        assert {"no", "wait", "stop", "hold on"} <= vocabulary.never


def test_prosody_finds_the_two_syllables_of_uh_huh() -> None:
    prosody = analyse(speech_fixtures.speech("uh-huh", "espeak", "en-us"), RATE)
    assert len(prosody.nuclei) == 2 and prosody.gaps[0].aspirated
    assert 300 <= prosody.duration_ms <= 450
    assert analyse(np.zeros(10, dtype=np.float32), RATE).duration_ms == 0


VOICES = [("espeak", voice) for voice in ESPEAK] + [("piper", None)]


@pytest.mark.parametrize(("transcript", "text", "engine", "voice"), [
    ("M-H-M", "mhm", "espeak", "en"), ("Mm-hm.", "mhm", "espeak", "en-gb-x-rp"),
    ("M. M.", "mm-hmm.", "piper", None), ("Mm", "mm", "espeak", "en-us"),
    ("Em", "hmm", "espeak", "en-us"), ("Hmm.", "hmm", "espeak", "en"),
    ("Mm.", "mm", "espeak", "en-us+f3")])
def test_a_hum_the_asr_spells_is_a_murmur_and_resumes(transcript: str, text: str, engine: str,
                                                      voice: str | None) -> None:
    """Issue 24: "Mhm" read "M-H-M" cut the reply and was answered. What tiny.en writes for
    these hums (measured) spells a hum: the sound decides as for "uh-huh", and one short
    syllable of a hum ("mm") says "go on"."""
    decision = classify(transcript, said(text, engine, voice), RATE)
    assert decision.verdict is Verdict.BACKCHANNEL, decision
    assert decision.rule in ("murmur", "murmur_h")


@pytest.mark.parametrize(("engine", "voice"), VOICES)
def test_laughter_resumes(engine: str, voice: str | None) -> None:
    """Issue 24: "ha ha ha ha" cut the reply and the laugh was answered (four words were
    over `MAX_WORDS`, and 1.0-1.1 s over the 1 s `max_backchannel_ms`). Three or more
    syllables joined by /h/, written as laughter, are laughter, in every voice."""
    for text, transcript in (("ha ha ha ha", "Ha ha ha ha."), ("ha ha ha", "Ha, ha, ha.")):
        decision = classify(transcript, said(text, engine, voice), RATE)
        assert (decision.verdict, decision.rule) == (Verdict.BACKCHANNEL, "laughter"), voice
    stammer = classify("Uh, uh, uh.", said("ha ha ha", engine, voice), RATE)
    assert stammer.verdict is Verdict.INTERRUPTION, "only what is written as laughter"


def test_a_long_one_syllable_hum_is_no_backchannel() -> None:
    """espeak-ng's "mm-mm" (no) is one nasal nucleus without a closure, 650-770 ms, read
    "MMMM.": longer than `MAX_HUM_MS`, it is an interruption like "uh-uh"; "oh" or "uh" alone
    (one vowel: tiny.en writes "Oh" for espeak-ng en-029's "uh-uh") is one too."""
    for voice in ("en-us", "en-us+f3", "en-gb-x-rp"):
        decision = classify("MMMM.", said("mm-mm", voice=voice), RATE)
        assert (decision.verdict, decision.rule) == (Verdict.INTERRUPTION, "murmur_closure")
    decision = classify("Uh.", said("uh", voice="en-029"), RATE)
    assert decision.verdict is Verdict.INTERRUPTION


@pytest.mark.parametrize(("text", "transcript"), [
    ("makes sense", "Make sense."), ("that makes sense", "That makes sense."),
    ("gotcha", "Gotcha!"), ("perfect", "Perfect."), ("thanks", "Thanks."),
    ("sounds good", "Sounds good."), ("of course", "Of course."), ("oh I see", "Oh, I see."),
    ("for sure", "For sure."), ("right on", "Right on."), ("brilliant", "Brilliant."),
    ("you bet", "You bet."), ("agreed", "Agreed."), ("I hear you", "I hear you."),
    ("lovely", "Lovely."), ("amazing", "Amazing."), ("that's fair", "That's fair."),
    ("neat", "Neat."), ("good point", "Good point."), ("fair point", "Fair point."),
    ("point taken", "Point taken."), ("good to know", "Good to know.")])
def test_multi_word_acknowledgments_resume(text: str, transcript: str) -> None:
    """Issue 24: "makes sense", "gotcha", "perfect", "thanks" were not on the list, nor (a
    tester's, transcribed right and answered) "for sure", "right on", "brilliant", "you bet",
    "agreed", "I hear you", "lovely", "amazing", "that's fair", "neat", and (another
    tester's, Piper, read right and cut) "good point". Asked
    ("Perfect?") or said with anything else ("Perfect, but wait.") they are interruptions."""
    decision = classify(transcript, said(text), RATE)
    assert (decision.verdict, decision.rule) == (Verdict.BACKCHANNEL, "backchannel_words")
    asked = classify(transcript.rstrip(".!") + "?", said(text), RATE)
    assert (asked.verdict, asked.rule) == (Verdict.INTERRUPTION, "question")
    more = classify(transcript.rstrip(".!") + ", but wait.", said(f"{text} but wait"), RATE)
    assert more.verdict is Verdict.INTERRUPTION


def test_a_murmur_or_a_laugh_beside_backchannel_words_goes_with_them() -> None:
    """A member of issue 24's kind: "mm, makes sense", "haha, nice", "uh-huh, yeah" are
    acknowledgments whatever the murmur sounds like; "uh-uh, okay" (uh-uh may say no) is left
    to the sound, and "haha, wait" is an interruption."""
    for transcript, text in (("Mm, makes sense.", "mm, makes sense"), ("Haha, nice.", "haha, nice"),
                             ("Uh-huh, yeah.", "uh-huh, yeah")):
        decision = classify(transcript, said(text), RATE)
        assert (decision.verdict, decision.rule) == (Verdict.BACKCHANNEL, "backchannel_words")
    assert classify("Uh-uh, okay.", said("uh-uh, okay"), RATE).rule != "backchannel_words"
    assert classify("Haha, wait.", said("haha, wait"), RATE).verdict is Verdict.INTERRUPTION


@pytest.mark.parametrize("voice", ["en-us+f3", "en-gb-x-rp+f2"])
def test_a_rising_pitch_asks_though_the_asr_wrote_no_question_mark(voice: str) -> None:
    """tiny.en writes "Sure." for espeak-ng's rising "sure?": in these voices its pitch ends
    1.7-2.0 semitones above the utterance's median whatever the audio's alignment to the
    analysis frames (`QUESTION_RISE_ST`), and it asks; "sure." falls and says "go on". (In
    the male voices the measured rise of "sure?" is 0.4-2.3 st depending on the alignment:
    the question mark must tell there.)"""
    asked = classify("Sure.", said("sure?", voice=voice), RATE)
    told = classify("Sure.", said("sure.", voice=voice), RATE)
    assert asked.prosody.final_rise_st >= QUESTION_RISE_ST > told.prosody.final_rise_st
    assert (asked.verdict, asked.rule) == (Verdict.INTERRUPTION, "question")
    assert (told.verdict, told.rule) == (Verdict.BACKCHANNEL, "backchannel_words")


@pytest.mark.parametrize("voice", ["en-us", "en-us+m3", "en-us+f2", "en-gb-scotland"])
def test_repeated_acknowledgments_and_written_laughs_resume(voice: str) -> None:
    """Members of issue 24's kinds found by trying the product: "I see, I see" (four words,
    over `MAX_WORDS`, though a phrase said twice), laughter written "Hee-hee." or "Heh heh
    heh." (not spelled as laughter) and "Cheers, sure." (tiny.en's reading of Piper's "sure
    sure") were cut and answered. A phrase repeated at once counts once, those spellings are
    laughter, and "cheers" thanks."""
    for text, transcript in (("I see, I see", "I see, I see."), ("hehe", "Hee-hee."),
                             ("heh heh heh", "Heh heh heh."), ("sure sure", "Cheers, sure.")):
        decision = classify(transcript, said(text, voice=voice), RATE)
        assert decision.verdict is Verdict.BACKCHANNEL, (text, decision.rule)
    twice = classify("I see, I see, but wait.", said("I see, I see, but wait", voice=voice), RATE)
    assert twice.verdict is Verdict.INTERRUPTION
