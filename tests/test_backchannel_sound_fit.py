"""The sound must fit the acknowledgment the ASR wrote (`server.listening.backchannel_fit`), and
misread acknowledgments spelled like what was said resume (rule 4b on words): real tiny.en on
Piper and espeak-ng speech as a pause over a reply decides it (`tests.test_asr.decision_audio`),
and over the protocol on a real server."""

from __future__ import annotations

import numpy as np
import pytest

from calibration.asr import Transcript
from calibration.local_asr import load_whisper_model
from calibration.whisper_window import PERSON_WINDOW_S, decode_window
from server.listening.backchannel import Decision, Verdict, classify, readings_to_score
from server.listening.backchannel_fit import MAX_VOICELESS_TAIL_MS, MIN_FRICATIVE_TAIL_MS, fits
from server.listening.prosody import analyse
from server.listening.server_vad_settings import DECISION_TAIL_MS
from server.listening.word_shape import measure
from tests import room_sounds, speech_fixtures
from tests.pausing_page import cut_over_reply
from tests.test_asr import decision_audio
from tests.test_backchannel_done import PATIENT, REPLY
from tests.test_backchannel_kinds import decided
from tests.test_backchannel_said_on import take

RATE = speech_fixtures.RATE_HZ


@pytest.mark.parametrize(("text", "engine", "voice", "read"), [
    ("pause", "piper", None, "Of course."), ("hey", "espeak", "en-029", "Okay."),
    ("enough", "espeak", "en-gb-x-rp", "Yeah.")])
def test_an_interruption_read_as_a_listed_acknowledgment_is_cut(
        text: str, engine: str, voice: str | None, read: str) -> None:
    """A tester's Piper "pause", read "Of course." (on the list), resumed the reply 4 of 4
    times; espeak-ng en-029's "hey", read "Okay.", 1 of 3; the benchmark's grid found
    en-gb-x-rp's "enough" read "Yeah.". One voiced nucleus cannot be "of course" or "okay"
    (two beats), and "yeah" does not end in 200 ms of /f/: interruptions. (tiny.en's reading
    of the server's espeak-ng takes differs from take to take - en-029's "hey" is also read
    "It's" -, since the server's espeak-ng shifts with what it spoke before
    (`server.speech.espeak_engine`), so the rule is checked on their audio with the reading
    the server got; Piper's is read so every time.)"""
    pcm = decision_audio(speech_fixtures.speech(text, engine, voice))
    decision = classify(read, pcm, RATE)
    assert (decision.verdict, decision.rule) == (Verdict.INTERRUPTION, "sound_misfit")
    if engine == "piper":
        heard = decided(text, engine, voice)
        assert heard is not None and heard.words == decision.words, heard
        assert (heard.verdict, heard.rule) == (Verdict.INTERRUPTION, "sound_misfit")


@pytest.mark.parametrize(("text", "engine", "voice"), [
    ("okay", "piper", None), ("okay", "espeak", "en-029"), ("perfect", "espeak", "en-us"),
    ("gotcha", "espeak", "en-gb-x-rp"), ("makes sense", "espeak", "en-us+f3"),
    ("oh I see", "piper", None), ("yeah", "espeak", "en-us"), ("yeah", "piper", None),
    ("cool", "espeak", "en-029"), ("sure thing", "piper", None)])
def test_listed_acknowledgments_fit_their_sound(text: str, engine: str,
                                                voice: str | None) -> None:
    """The acknowledgments the rule checks, said and read as themselves, still resume."""
    decision = decided(text, engine, voice)
    assert decision is not None, text
    assert (decision.verdict, decision.rule) == (Verdict.BACKCHANNEL, "backchannel_words")


def read_as(text: str, engine: str, voice: str | None, misread: str) -> Decision:
    """The decision on `text` said over a reply had tiny.en read it `misread`: its audio as a
    pause decides it, with whisper's own scores of `misread` and of the acknowledgment and
    interruption readings on it (`calibration.whisper_window.decode_window`). tiny.en's greedy
    reading of espeak-ng speech differs between the server's takes (its audio shifts with what
    the library spoke before: `server.speech.espeak_engine`); its scores of the same readings
    move far less."""
    pcm = decision_audio(speech_fixtures.speech(text, engine, voice)).astype(np.float32)
    _text, scored = decode_window(load_whisper_model(), pcm, PERSON_WINDOW_S, readings_to_score)
    return classify(Transcript(misread, murmur=scored(misread)), pcm, RATE)


@pytest.mark.parametrize(("text", "engine", "voice", "misread", "reading"), [
    ("right right", "piper", None, "Bike right.", "Right, right."),
    ("oh I see", "espeak", "en-gb-x-rp", "Oh my feet.", "Oh, I see."),
    ("sure thing", "espeak", "en-gb-x-rp", "shorting", "Sure thing.")])
def test_a_misread_acknowledgment_spelled_alike_resumes(
        text: str, engine: str, voice: str | None, misread: str, reading: str) -> None:
    """Piper's "right right" read "Bike right.", "oh I see" read "Oh my feet.", "sure thing"
    read "shorting" (as the server read them): whisper, forced to read the audio as the
    acknowledgment, finds it about as likely as its words and far likelier than any
    interruption, the words are spelled alike and the sound fits: backchannels. Piper's,
    said over a reply, resumes it: read "Bike right." on an Intel MKL machine, "right right"
    (its words) under `calibration.cpu_numerics`. (A tester's espeak-ng en-029 "nice" read
    "The ice." is left out: its "Nice." reading scored 0.6015 below its words on one
    machine, 0.0015 past the 0.6 the rule then allowed, and within it on another; a case that
    close to the rule's edge tests the CPU's float path, not the rule.)"""
    decision = read_as(text, engine, voice, misread)
    assert (decision.verdict, decision.rule, decision.reading) == (
        Verdict.BACKCHANNEL, "acknowledgment_reading", reading), decision
    if engine == "piper":
        heard = decided(text, engine, voice)
        assert heard is not None and heard.verdict is Verdict.BACKCHANNEL, heard
        assert heard.reading in (None, reading), heard


def test_fair_enough_resumes_and_enough_alone_is_an_interruption() -> None:
    """"fair enough" was cut by its never-word "enough"; "that's enough" and "enough" stay
    interruptions."""
    decision = decided("fair enough", "piper", None)
    assert decision is not None and decision.verdict is Verdict.BACKCHANNEL, decision
    audio = speech_fixtures.speech("enough", "piper")
    for transcript in ("That's enough.", "Enough.", "Fair enough, but wait."):
        assert classify(transcript, audio, RATE).verdict is Verdict.INTERRUPTION, transcript


def test_a_sound_with_one_nucleus_fits_one_beat_words_only() -> None:
    """`fits` on Piper's "pause": one nucleus and one vowel beat, then its /z/: it fits
    "thanks" (not checked), neither two-beat words nor a word ending on its vowel ("cool")."""
    pcm = speech_fixtures.speech("pause", "piper")
    prosody, shape = analyse(pcm, RATE), measure(pcm, RATE)
    assert len(prosody.nuclei) == 1 and len(shape.beats) == 1
    assert shape.tail_ms <= MAX_VOICELESS_TAIL_MS and shape.fricative_ms >= MIN_FRICATIVE_TAIL_MS
    assert fits(("thanks",), prosody, shape) and not fits(("cool",), prosody, shape)
    assert not fits(("of course",), prosody, shape)
    assert not fits(("oh", "okay"), prosody, shape)


@pytest.mark.parametrize(("text", "engine", "voice"), [
    ("pause", "piper", None), ("hey", "espeak", "en-029")])
async def test_an_interruption_read_as_an_acknowledgment_cuts_the_reply(
        start_server, text: str, engine: str, voice: str | None) -> None:
    """The tester's cases over the protocol (900 ms into a reply, server VAD, tiny.en): the
    reply is cut where it paused and never resumes; the words are a turn."""
    server = await start_server(tts="uniform", calibration="marks", lead_ms=400)
    mic = np.concatenate([speech_fixtures.silence(900),
                          speech_fixtures.speech(text, engine, voice),
                          speech_fixtures.silence(2500)])
    await cut_over_reply(server.ws_url, REPLY, mic, PATIENT)


@pytest.mark.parametrize(("text", "voice", "misread"), [
    ("hey", "en-us", "Hee."), ("hey", "en-gb-x-rp", "Hee."), ("hey", "en-us+m3", "Hee!")])
def test_a_hey_written_as_a_one_syllable_laugh_is_cut(text: str, voice: str,
                                                      misread: str) -> None:
    """The benchmark's grid: espeak-ng en-gb-scotland's "hey", 900 ms into a reply, read
    "Hee." and resumed as a one-syllable laugh. A one-syllable laugh is one only when whisper
    finds every interruption's reading ("Hey.") far less likely than its words; a real "hey"
    read "Hee." fails that in every voice (checked on their audio: en-gb-scotland's "hey" is
    not always heard by server VAD offline)."""
    decision = read_as(text, "espeak", voice, misread)
    assert decision.verdict is Verdict.INTERRUPTION, decision
    assert len(decision.prosody.nuclei) == 1


def test_a_one_syllable_laugh_whisper_reads_clearly_still_resumes() -> None:
    """espeak-ng en-029's "hee", read "Hee!": "Hey!" is 1.25 below its words."""
    decision = read_as("hee", "espeak", "en-029", "Hee!")
    assert (decision.verdict, decision.rule) == (Verdict.BACKCHANNEL, "laughter")


@pytest.mark.parametrize(("text", "engine", "voice", "read"), [
    ("take", "piper", None, "right."), ("Right, but why?", "piper", None, "Right."),
    ("Yeah, but wait.", "espeak", "en-us", "Yeah."),
    ("Sure, but when?", "espeak", "en-gb-scotland", "Sure."),
    ("Okay, and then?", "espeak", "en-029", "Okay."),
    ("Mm-hmm, so what about Sunday?", "espeak", "en-gb-x-rp", "Mm-hmm, so."),
    ("Right, so what?", "espeak", "en-us+f3", "Right."),
])
def test_an_acknowledgment_said_with_more_is_cut_when_only_its_word_is_read(
        text: str, engine: str, voice: str | None, read: str) -> None:
    """A tester's take of Piper "Right, but why?" (`tests.test_backchannel_said_on.take`: three
    vowel beats) was decided on the transcript "right." and resumed the reply: the question
    was never answered. The whole utterance's sound (300 ms of silence each side) against
    the acknowledgment alone: more beats than its syllables and one, an interruption
    (`backchannel_fit.SPARE_BEATS`); the others are held out (phrases and voices the rule was
    not tuned on). (Server VAD reports a gap after the first word of most: the decision on
    that word alone is dropped once the person speaks on, `tests/test_pauses.py`.)"""
    pcm = (take() if text == "take"
           else speech_fixtures.place(speech_fixtures.speech(text, engine, voice), 300, 300))
    decision = classify(read, pcm, RATE)
    assert decision.verdict is Verdict.INTERRUPTION, decision.rule


@pytest.mark.parametrize(("text", "engine", "voice", "read"), [
    ("yeah yeah", "espeak", "en-us+f3", "Yeah."), ("right, right", "piper", None, "Right."),
    ("thanks", "espeak", "en-gb-x-rp", "Thanks."), ("exactly", "espeak", "en-us", "Exactly."),
    ("that makes sense", "piper", None, "That makes sense."),
])
def test_an_acknowledgment_said_twice_or_long_still_fits(
        text: str, engine: str, voice: str | None, read: str) -> None:
    """A word said twice and written once (two beats), en-gb-x-rp's "thanks" (one vowel split
    in two beats) and three-syllable acknowledgments stay backchannels."""
    decision = classify(read, decision_audio(speech_fixtures.speech(text, engine, voice)), RATE)
    assert (decision.verdict, decision.rule) == (Verdict.BACKCHANNEL, "backchannel_words")


def in_a_street(utterance: np.ndarray, seed: int) -> np.ndarray:
    """`utterance` at -6 dBFS peak with 200 ms before it and the decision's tail after it
    (`DECISION_TAIL_MS`), over a street at -30 dBFS RMS (`tests.room_sounds.street`: about
    7-10 dB under the word's RMS)."""
    said_ = utterance / np.max(np.abs(utterance)) * 10.0 ** (-6.0 / 20.0)
    placed = speech_fixtures.place(said_, 200, DECISION_TAIL_MS)
    return (placed + room_sounds.street(placed.size * 1000 / RATE, -30.0, seed)).astype(
        np.float32)


@pytest.mark.parametrize(("text", "engine", "voice"), [
    ("Stop.", "piper", None), ("wait", "piper", None), ("no", "espeak", "en-us"),
    ("stop", "espeak", "en-029"), ("hey", "espeak", "en-us+f3"),
    ("pause", "espeak", "en-gb-x-rp"), ("stop", "espeak", "en-us+m7")])
def test_one_beat_interruptions_read_as_got_it_in_a_street_are_cut(
        text: str, engine: str, voice: str | None) -> None:
    """A tester's Piper "Stop." in a street (traffic at -30 dBFS RMS) was read "Got it." and
    resumed the reply: a real interruption taken for a backchannel. One vowel beat cannot be
    "got it", nor another acknowledgment of two beats (`backchannel_fit.TWO_BEATS`): an
    interruption, over the street."""
    for seed in (0, 1):
        pcm = in_a_street(speech_fixtures.speech(text, engine, voice), seed)
        for misread in ("Got it.", "Sounds good.", "All right.", "Lovely.", "You bet."):
            decision = classify(misread, pcm, RATE)
            assert (decision.verdict, decision.rule) == (
                Verdict.INTERRUPTION, "sound_misfit"), misread


@pytest.mark.parametrize(("engine", "voice"), [
    ("piper", None), ("espeak", "en-us"), ("espeak", "en-029"), ("espeak", "en-us+f3"),
    ("espeak", "en-gb-scotland")])
def test_got_it_read_as_itself_in_a_street_still_resumes(engine: str,
                                                         voice: str | None) -> None:
    """"Got it." said and read so, over the same street and in silence, still fits its
    words."""
    utterance = speech_fixtures.speech("Got it.", engine, voice)
    for pcm in (in_a_street(utterance, 0), decision_audio(utterance)):
        decision = classify("Got it.", pcm, RATE)
        assert (decision.verdict, decision.rule) == (Verdict.BACKCHANNEL, "backchannel_words")
