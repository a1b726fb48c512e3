"""Is what the person said over a paused reply a backchannel ("uh-huh") or an interruption?

`classify` decides from the utterance's transcript, its length and its prosody
(`server.listening.prosody`), per language. The rule (English; measured on espeak-ng and Piper
voices with faster-whisper tiny.en, `benchmarks/bench_backchannel.py`):

1. Longer than `max_ms` or more than `MAX_WORDS` words (a word or phrase repeated at once
   counts once: "ha ha ha ha", "yeah yeah yeah", "I see, I see"): an interruption.
2. Any word or phrase of `NEVER` ("no", "wait", "stop", "hold on", ...): an interruption, also
   beside a backchannel ("yeah but wait"); not inside a listed acknowledgment that holds it
   ("fair enough"; "that's enough" stays an interruption).
3. Only words of `BACKCHANNELS` ("yeah", "right", "okay", "I see", and acknowledgments of
   one to three words: "makes sense", "gotcha", "perfect", "thanks", "sounds good", ...),
   perhaps with interjections or murmurs ("oh okay", "ah I see", "mm, makes sense", "haha,
   nice"; not with a murmur that may say no, "uh-uh, okay": rule 4): a backchannel, unless
   it was asked (`question`): the ASR wrote a question mark, or the pitch rose at its end by
   `QUESTION_RISE_ST` or more, lifting its last syllable after two or more
   (`Prosody.final_rise_st`, `MIN_QUESTION_LIFT_ST`; tiny.en writes "Sure." for a
   rising "sure?" in some voices), or its sound does not fit the words (`sound_misfit`,
   `server.listening.backchannel_fit`: "Of course." for Piper's one-syllable "pause",
   "Okay." for espeak-ng en-029's "hey", "Yeah." for en-gb-x-rp's "enough").
4. Only murmur words (`MURMURS`: "uh", "uh-uh", "mm", "hmm", ..., any spelling of a hum the
   ASR writes for one - "M-H-M", "M. M.", "Emm" -, laughter - "ha", "haha" - or no words at
   all) or a lone interjection (`INTERJECTIONS`: "oh", "ah", which tiny.en also writes for a
   murmur: "Oh" for espeak-ng en-029's "uh-uh", for Piper's "uh-huh"): the ASR cannot tell
   "uh-huh" (yes) from "uh-uh" (no) - tiny.en writes "Uh-uh." for both - so the sound
   decides. Audio with almost nothing voiced and no words (a cough, a door) is `NOISE`;
   voiced audio with no words is a backchannel (`no_words`), held until the person is done
   like any other: a turn without words is deleted unanswered, so a cut for it leaves the
   person with silence (a tester: espeak-ng en-gb-x-gbcwmd's "yeah", one vowel, transcribed
   as nothing, cut as a closure and never answered, 3 of 3), as LiveKit's
   `resume_false_interruption` resumes after an interruption that produced no words.
   Unless whisper, forced to read it, finds an interruption ("Hey.") about as likely as any
   murmur or laugh (`murmurs.interruption_unheard`: tiny.en hears nothing in espeak-ng
   en-gb-scotland's "hey"): an interruption (`no_words_interruption`).
   Two or more voiced syllables all joined by aspirated gaps and written as laughter are
   laughter (a backchannel; a gap may be shorter than `MIN_ASPIRATED_GAP_MS`: Piper's "heh
   heh" and espeak-ng en-us+f3's "ha ha ha ha" have one of 30 ms, and a dropout inside one
   vowel is bridged by the prosody), and so is one syllable written as a laugh, once or
   again, and not asked (tiny.en's "Hee!", "Hee", "Ha!" for espeak-ng en-gb-scotland's and
   en-029's one "hee" and "ha", "Ha ha." for Piper's one-beat "haha"; "Huh?" - espeak-ng's
   "ha" in other voices - is a question, and "huh" is no laugh spelling: it may mean
   "what?") when whisper finds every interruption's reading far less likely than its words
   or a laugh's reading (`murmurs.laugh_clear`: tiny.en wrote "Hee." for espeak-ng
   en-gb-scotland's "hey", and it resumed);
   two syllables joined by an aspirated gap (the /h/ of "uh-huh", "mm-hmm") or rising from
   the first to the second (the yes-contour) are a backchannel; one syllable is
   a backchannel when it is a hum ("mm", "hmm", "Em") no longer than `MAX_HUM_MS` (a longer
   one is "mm-mm", no) and not asked (as in rule 3: "hm?");
   two syllables split by a closure (the glottal stop of "uh-uh", "mm-mm") and not rising,
   and one syllable of a vowel ("uh", "oh": espeak-ng en-us and en-029 "uh-uh" can be one
   nucleus, its glottal stop too short to split it), are an interruption. A question mark
   makes any of them a question.
4a. Other words, but a hum misread: the recogniser itself finds a hum
   reading of the audio ("Mm-hmm.") plausible beside its words (`calibration.asr_readings`:
   `MIN_HUM_READING_LOGPROB`, `HUM_READING_MARGIN`), or "Uh-huh." more plausible still
   (`murmurs.uh_huh_misread`: "I had" for Piper's "uh huh" over a room), the ASR wrote no
   question mark, and the
   sound is a murmur: two voiced syllables joined by an /h/, the second a repeat of the first
   (`MAX_REPEAT_CHANGE_DB`). tiny.en writes "And then boom.", "It may end time.", "In a
   game." for espeak-ng's "mm-hmm" and "mhm": backchannels. Words of `NEVER` in such a
   reading ("It's not the same." for espeak-ng en-029's "mm-hmm" in the server, "And
   again" for en-gb-x-rp's "mhm") decide only when whisper finds them likelier than the
   hum: a real "no", "wait", "stop" or "hold on" is one syllable, or two that differ or are
   split by a closure, never this murmur. Both tests are needed: whisper
   finds a hum reading as plausible for "mom", "ma'am", "name", "nine", "Emma", "me too" and
   "and then" (one syllable, or two that differ), which stay interruptions; and the sound
   alone took "how come?" (read "Hot comb."), "I hope.", "Let me..." and "Anyhow." for
   murmurs, while whisper's hum readings of them are unlikely (below
   `MIN_HUM_READING_LOGPROB`, or far below their words: `HUM_READING_MARGIN`). One
   syllable is never taken here: Piper's "mm" read "Amen." and espeak-ng en-029's read "in"
   sound, to whisper and to `prosody`, like "mom" and "him", and are answered.
4b. Letters spelled out ("Y-T", "A-E, A-E": what tiny.en writes for a sound it cannot read as
   words; no word was said), but whisper, forced to read the audio as an acknowledgment
   ("Oh, I see."), finds that likelier than the letters and far likelier than any
   interruption (`server.listening.backchannel_readings`; not asked): a backchannel. tiny.en
   writes "Y-T" for espeak-ng en-gb-scotland's "oh I see". Other short words (no never-word)
   are taken for an acknowledgment on the same scores when its reading is within
   `READING_MARGIN` of the words, they are spelled alike (`MIN_SPELLING_MATCH`) and the sound
   fits it (`backchannel_fit`): "The ice." for espeak-ng's "nice", "Bike right." for Piper's
   "right right", "Oh my feet." for "oh I see", "shorting" for "sure thing". Whisper's scores
   alone do not tell misreads from words said ("copy", for "coffee", scores "Got it." as
   likely; "Amen." for Piper's "mm" prefers its words): the spelling and the interruptions'
   readings keep words said, and misread interruptions, out.
4c. Other words (one or two), but a laugh misread (`server.listening.murmurs`): two or more
   voiced beats joined by an /h/, one sound repeated, not asked, and whisper, forced to read
   the audio as a laugh ("Heh heh."), finds that at least as likely as its words and far
   likelier than any interruption: a backchannel. tiny.en writes "ahead" for Piper's "heh
   heh", "KK" for espeak-ng en-us+m3's "hee hee".
5. Anything else: an interruption, whatever it sounds like. Without the recogniser's scores
   (a remote ASR, audio longer than `calibration.asr_readings.MAX_SCORED_S`) words the ASR
   wrote are never overruled by the sound.

`NEVER` wins, but over a hum misread as words (rule 4a): "uh-uh", "no", "wait" and "stop" are
never backchannels, whatever the prosody. Prior art: LiveKit Agents' false-interruption
handling (`resume_false_interruption`, `false_interruption_timeout`,
`min_interruption_words`) resumes after an interruption that produced no words; this adds the
words and sounds a listener uses to say "go on".
"""

from __future__ import annotations

import difflib
import enum
import re
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from calibration.asr import Transcript
from calibration.asr_readings import MurmurReading
from server.listening import backchannel_fit, murmurs, word_shape
from server.listening.backchannel_readings import (
    ACKNOWLEDGMENT_READINGS,
    READINGS,
    acknowledgment_reading,
)
from server.listening.prosody import Prosody, analyse

MAX_WORDS = 3
"""A backchannel has at most this many words ("yeah yeah yeah", "oh I see")."""

MIN_ASPIRATED_GAP_MS = 40
"""Shortest gap between two syllables that counts as an /h/ (espeak-ng "uh-huh": 40-50 ms);
shorter dips are pitch-tracker dropouts inside one vowel."""
RISING_ST = 2.0
"""Pitch rise (semitones) from the first to the second syllable of a yes-murmur."""
QUESTION_RISE_ST = 1.2
"""Terminal pitch rise (semitones, `Prosody.final_rise_st`) that makes a backchannel word or a
one-syllable hum a question. Measured on espeak-ng voices (`tests/test_backchannel.py`):
"sure?" ends 1.7-2.0 st above its median in the female voices (en-us+f3, en-gb-x-rp+f2) and
0.4-2.3 st in the male ones (depending on the audio's alignment to the frames), while "sure.",
"yeah.", "right.", "okay.", "thanks.", "perfect.", "got it.", "makes sense.", "mm", "hmm", "mm-hmm",
"uh-huh" and laughter end at most 0.9 st above it; Piper's one-word questions end level
(-0.3 to 0.2 st), so for Piper, as for "right?" and "okay?" in every voice, only the ASR's
question mark tells."""
MIN_QUESTION_LIFT_ST = 1.0
"""After two syllables or more, a terminal rise (`QUESTION_RISE_ST`) asks only when the last
syllable itself rises to its end by this much (semitones, `Prosody.final_lift_st`): a
question's rise is inside its last syllable (J. Pierrehumbert 1980's H-H%), while a
statement's final stress can step up to a last syllable that falls to its end: Piper's
"thank you." (+3.1 to +4.5 over the median, lifted 0-0.1) and "interesting." (+2.1 to +2.9,
lifted 0-0.25 at length scales 0.9-1.3) were cut as questions. (One syllable's rise is its
own: `final_rise_st` alone decides, as measured on espeak-ng "sure?", lifted 1.4-6.4.)"""
MAX_HUM_MS = 600
"""Longest one-syllable hum taken for "mm" (rule 4): espeak-ng "mm" and "hmm" last 370-540 ms
and Piper's "mm-hmm" (one nucleus) 520 ms, while espeak-ng's "mm-mm" (no), one nucleus with
no closure, lasts 650-770 ms."""
MIN_HUM_READING_LOGPROB = -2.2
"""Rule 4a: a hum reading whose mean token log probability (`calibration.asr_readings`) is at
least this is plausible. Measured (tiny.en, the person's 15 s window) on
`benchmarks/bench_backchannel.py`'s recordings as the server decides them: -0.9 to -2.05 on the
hums tiny.en wrote as words or as hums; -2.2 to -3.9 on every other word and phrase ("wait",
"no", "hang on", "what?", "thanks", "perfect", "okay"), -3.1 and -3.2 on the interruptions it
misread ("with" for "wait", "Fan Yang" for "hang on")."""
HUM_READING_MARGIN = 0.7
"""Rule 4a: a hum reading less likely than the transcript's own words by more than this (mean
token log probability, natural log) is not taken: the words were heard. Measured under
`calibration.cpu_numerics` (tiny.en, the person's 15 s window): the two-syllable hums read as
words of `tests/test_backchannel_hums.py` (espeak-ng "mm-hmm", "mhm") have "Mm-hmm." from 0.4
above to 0.50 below their words; espeak-ng en-gb-x-rp's "I have", read "I am" at -0.52, has it
at -1.41 (0.89 below: it was resumed at 1.0); espeak-ng's "perfect", read at -0.47 to -0.75,
at -2.9 to -3.9. (Piper's "mm", read "Amen." 0.83 above its hum reading, is one syllable: rule
4a's sound is not a murmur's.)"""
MAX_REPEAT_CHANGE_DB = 5.0
"""Rule 4a: two syllables whose sound changes by at most this (`Prosody.syllable_change_db`)
are one sound said twice, as in "mm-hmm". Measured on espeak-ng and Piper: "mm-hmm", "mhm",
"uh-huh" and laughter 1-5 dB; "okay", "perfect", "I hope", "let me", "my turn", "anyhow"
5.9-16 dB; of the two-syllable /h/ words whose hum reading is plausible, "and then" and
"me too" 6-10 dB in three voices (espeak-ng en-us's "me too", 4 dB, passes)."""
READING_MARGIN = 0.9
"""Rule 4b: an acknowledgment's reading may be this much less likely than the transcript's
own words (mean token log probability, natural log) and still be what was said. Under
`calibration.cpu_numerics` Piper's "got it" over a TV at -45 dBFS is read "about it." with
"Got it." 0.82 below (it was answered at 0.6). Measured before on
`benchmarks/bench_backchannel.py`'s recordings as the server decides them (tiny.en): "The
ice." for espeak-ng's "nice" is 0.40 and 0.44 likelier than "Nice." (0.56 for en-029's take in
a fresh process, the tests' `tests/test_backchannel_sound_fit.py`), "and make an" (Piper's
"mhm") 0.23 than "Mm-hmm."; "Bike right.", "Oh my feet.", "shorting" are less likely than
their acknowledgment. Misreads further off ("That's it." for Piper's "gotcha", 1.58; "Got
it and..." for "got it thanks", 0.62) stay interruptions."""
MIN_SPELLING_MATCH = 0.5
"""Rule 4b on words: the transcript must be spelled like the acknowledgment it is taken for
(a misread keeps most of its letters). Measured: "The ice." / "Nice." 0.60, "Bike right." /
"Right, right." 0.53, "Oh my feet." / "Oh, I see." 0.57, "shorting" / "Sure thing." 0.59;
espeak-ng en-gb-scotland's "coffee" read "copy", which whisper scores as likely as "Got it."
(`tests/test_backchannel_kinds.py`), 0.22; "O'a'ji!" (espeak-ng en-us+f3's "oh I see") 0.40."""
NOISE_VOICED_SHARE = 0.15
"""Audio with no words and less than this share voiced is noise, not speech."""


class Verdict(enum.Enum):
    """What an utterance over a paused reply was."""

    BACKCHANNEL = "backchannel"
    INTERRUPTION = "interruption"
    NOISE = "noise"


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """One language's word lists (lower case, ASCII hyphens and apostrophes).

    Attributes:
        backchannels: words and phrases that say "go on".
        never: words and phrases that are never backchannels (a phrase matches whole words).
        murmurs: non-words whose meaning the sound decides (rule 4).
        interjections: words that the ASR also writes for murmurs: beside a backchannel word
            they are part of it (rule 3), alone the sound decides (rule 4).
        hum_spelling: a word that spells a closed-mouth hum ("mm", "m-h-m", "emm"): a murmur
            (rule 4) though not on the `murmurs` list, and one syllable of it a backchannel.
        laugh_spelling: a word that spells laughter ("ha", "haha", "hee-hee", "heh"): a
            murmur (rule 4).
        negative_murmurs: murmurs that may say "no" ("uh-uh", "mm-mm"): beside backchannel
            words the sound decides (rule 4); other murmurs beside them go with them (rule 3).
    """

    backchannels: frozenset[str]
    never: frozenset[str]
    murmurs: frozenset[str]
    interjections: frozenset[str]
    hum_spelling: re.Pattern[str]
    laugh_spelling: re.Pattern[str]
    negative_murmurs: frozenset[str]

    def hum(self, word: str) -> bool:
        """True when `word` (normalised) spells a hum."""
        return self.hum_spelling.fullmatch(word) is not None

    def murmur(self, word: str) -> bool:
        """True when `word` (normalised) is a murmur: on the list or spelling a hum or a
        laugh."""
        return word in self.murmurs or self.hum(word) or (
            self.laugh_spelling.fullmatch(word) is not None)


VOCABULARIES: dict[str, Vocabulary] = {
    "en": Vocabulary(
        backchannels=frozenset({
            "yeah", "yes", "yep", "yup",
            "yah", "yay", "right", "okay", "ok", "o.k", "k", "sure", "i see", "see", "got it",
            "alright", "all right", "cool", "true", "exactly", "aha",
            "go on", "i know", "indeed", "great", "nice", "good", "wow", "really",
            "makes sense", "make sense", "that makes sense", "it makes sense", "gotcha", "got you",
            "i got it", "perfect", "thanks", "sounds good", "sound good", "of course",
            "understood", "i understand", "i get it", "awesome", "excellent", "interesting",
            "that's right", "that's true", "that's good", "that's great", "very good",
            "fine", "absolutely", "definitely", "totally", "uh-huh yeah", "cheers",
            "sure thing", "thank you", "thanks a lot", "all good", "for sure", "right on",
            "brilliant", "you bet", "agreed", "i hear you", "lovely", "amazing", "that's fair",
            "neat", "fair enough", "good point", "fair point", "point taken", "good to know",
        }),
        never=frozenset({
            "unh-unh", "nuh-uh", "no", "nope", "nah", "not", "don't", "wait",
            "stop", "hold on", "hold", "hang on", "hang", "pause", "sorry", "excuse me",
            "excuse", "but", "what", "why", "how", "actually", "enough", "shut up", "quiet",
            "cancel", "never mind", "again", "repeat", "slow", "slower", "louder", "help",
            "question",
        }),
        murmurs=frozenset({
            "uh-huh", "uh huh", "mm-hmm", "mm hmm", "mhm", "mm-hm", "uh", "uh-uh", "uh uh",
            "uh-oh", "uh oh", "um", "umm", "uhm", "mm", "mmm", "mmmm", "hm",
            "hmm", "mm-mm", "mm mm", "huh", "ha", "er", "erm",
        }),
        interjections=frozenset({"oh", "ah"}),
        hum_spelling=re.compile(r"(?=[a-z.-]*m)(?:(?:e?m+|[mh]+)[.-]?)+"),
        laugh_spelling=re.compile(r"ha|hah|heh|hee|(?:h[aeio]+h?-?){2,}"),
        negative_murmurs=frozenset({"uh-uh", "mm-mm"}),
    ),
}
"""Word lists per language (ISO 639-1)."""

_WORD = re.compile(r"[a-z0-9'.-]+")
_LETTERS = re.compile(r"[a-z](?:[-.][a-z])+")
"""Letters spelled out, joined by hyphens or dots ("y-t", "a.e": the word's edge punctuation
is stripped by `normalise`)."""


@dataclass(frozen=True, slots=True)
class Decision:
    """A classification and why.

    Attributes:
        verdict: backchannel, interruption or noise.
        rule: which rule of the module docstring decided ("too_long", "never_word",
            "question", "backchannel_words", "laughter", "murmur_h", "murmur_rising",
            "murmur", "murmur_closure", "no_words", "no_words_interruption", "hum_reading",
            "laugh_reading",
            "acknowledgment_reading", "noise", "other_words").
        words: the normalised words of the transcript.
        prosody: the measured prosody.
        reading: the hum reading the sound was judged as (rule 4a: "Mm-hmm."), or the
            acknowledgment whisper preferred (rule 4b: "Oh, I see.") or the laugh (rule 4c:
            "Heh heh."), None when the transcript's own words were.
    """

    verdict: Verdict
    rule: str
    words: tuple[str, ...]
    prosody: Prosody
    reading: str | None = None


def normalise(transcript: str) -> tuple[str, ...]:
    """Lower-case words of `transcript` without punctuation around them ("Uh-uh." ->
    ("uh-uh",); typographic apostrophes and dashes become ASCII)."""
    text = transcript.lower().replace("\u2019", "'").replace("\u2010", "-").replace("\u2011", "-")
    return tuple(word.strip(".-'") for word in _WORD.findall(text) if word.strip(".-'"))


def _phrases(words: tuple[str, ...]) -> set[str]:
    """Every word and every run of two or three words (joined by a space)."""
    found = set(words)
    for size in (2, 3):
        found.update(" ".join(words[i:i + size]) for i in range(len(words) - size + 1))
    return found


def _never_said(words: tuple[str, ...], vocabulary: Vocabulary) -> bool:
    """A word or phrase of `vocabulary.never` is said outside the listed acknowledgments that
    hold one ("fair enough" holds "enough", an interruption alone: "that's enough")."""
    kept = list(words)
    for at in range(len(words)):
        for size in (3, 2):
            phrase = words[at:at + size]
            if (len(phrase) == size and " ".join(phrase) in vocabulary.backchannels
                    and set(phrase) & vocabulary.never):
                kept[at:at + size] = [""] * size
    return bool(_phrases(tuple(kept)) & vocabulary.never)


def _covered(words: tuple[str, ...], vocabulary: frozenset[str]) -> bool:
    """True when `words` split into phrases of `vocabulary` (at most three words each)."""
    return _split(words, vocabulary) is not None


def _split(words: tuple[str, ...], vocabulary: frozenset[str]) -> tuple[str, ...] | None:
    """`words` split into phrases of `vocabulary` (the longest first, at most three words
    each), None when they do not split so."""
    phrases: list[str] = []
    at = 0
    while at < len(words):
        size = next((n for n in (3, 2, 1) if " ".join(words[at:at + n]) in vocabulary), 0)
        if size == 0:
            return None
        phrases.append(" ".join(words[at:at + size]))
        at += size
    return tuple(phrases)


def _aspirated(prosody: Prosody, min_gap_ms: int = MIN_ASPIRATED_GAP_MS) -> bool:
    """Every gap between the voiced syllables is an /h/ (aspirated, `min_gap_ms` or longer)."""
    return all(gap.aspirated and gap.duration_ms >= min_gap_ms for gap in prosody.gaps)


def _asked(transcript: str, prosody: Prosody) -> bool:
    """The ASR wrote a question mark, or the pitch rose at the end (`QUESTION_RISE_ST`),
    after more than one syllable also inside the last one (`MIN_QUESTION_LIFT_ST`)."""
    return "?" in transcript or (prosody.final_rise_st >= QUESTION_RISE_ST and (
        len(prosody.nuclei) < 2 or prosody.final_lift_st >= MIN_QUESTION_LIFT_ST))


def _word_count(words: tuple[str, ...]) -> int:
    """Words, a word or a phrase of up to three repeated at once counted once ("ha ha ha ha"
    is one word, "I see, I see" two)."""
    kept: list[str] = []
    for word in words:
        kept.append(word)
        for size in (1, 2, 3):
            if len(kept) >= 2 * size and kept[-size:] == kept[-2 * size:-size]:
                del kept[-size:]
                break
    return len(kept)


def classify(transcript: str, pcm: np.ndarray, sample_rate_hz: int, *, language: str = "en",
             max_ms: int = 1500, room_dbfs: float | None = None) -> Decision:
    """Classify an utterance heard over a paused reply (rules in the module docstring).

    Args:
        transcript: its ASR transcript ("" when none).
        pcm: its audio, 1-D float in [-1, 1] (the committed utterance: speech plus margins).
        sample_rate_hz: rate of `pcm`.
        language: ISO 639-1 code of `VOCABULARIES`.
        max_ms: the longest backchannel (ms of speech by `Prosody.duration_ms`).
        room_dbfs: the room's loud level (dBFS, server VAD's room background), None when
            unknown: the prosody is measured only on what stands above it
            (`server.listening.room_floor`), so the room's voices in `pcm` are no syllables
            of the person's.

    Raises:
        KeyError: no vocabulary for `language`.
    """
    vocabulary = VOCABULARIES[language]
    words = normalise(transcript)
    prosody = analyse(pcm, sample_rate_hz, room_dbfs)
    shape = word_shape.measure(pcm, sample_rate_hz, room_dbfs)

    def decided(verdict: Verdict, rule: str) -> Decision:
        return Decision(verdict, rule, words, prosody)

    if prosody.duration_ms > max_ms:
        return decided(Verdict.INTERRUPTION, "too_long")
    hum = _hum_reading(transcript, prosody)
    if _never_said(words, vocabulary) and not (hum and hum.murmur_logprob
                                               >= hum.text_logprob):
        return decided(Verdict.INTERRUPTION, "never_word")
    spoken = vocabulary.backchannels | vocabulary.interjections
    said = tuple(word for word in words
                 if not vocabulary.murmur(word) or word in vocabulary.negative_murmurs)
    few = _word_count(words) <= MAX_WORDS
    if (few and said and _covered(said, spoken) and not _covered(said, vocabulary.interjections)
            and not any(vocabulary.murmur(word) for word in said)):
        if _asked(transcript, prosody):
            return decided(Verdict.INTERRUPTION, "question")
        if not backchannel_fit.fits(_split(words, spoken | frozenset(words)) or (), prosody,
                                    shape):
            return decided(Verdict.INTERRUPTION, "sound_misfit")
        return decided(Verdict.BACKCHANNEL, "backchannel_words")
    if few and all(vocabulary.murmur(word) or word in spoken for word in words) and _covered(
            tuple(word for word in words if not vocabulary.murmur(word)), spoken):
        return _by_sound(words, transcript, prosody, vocabulary, decided)
    if hum is not None:
        return Decision(Verdict.BACKCHANNEL, "hum_reading", words, prosody, reading=hum.murmur)
    laugh = murmurs.laugh_reading(transcript.murmur if isinstance(transcript, Transcript)
                                  else None, prosody, _asked(transcript, prosody))
    if laugh is not None and few:
        return Decision(Verdict.BACKCHANNEL, "laugh_reading", words, prosody, reading=laugh)
    acknowledged = _acknowledgment(transcript, prosody, shape, language) if few else None
    if acknowledged is not None:
        return Decision(Verdict.BACKCHANNEL, "acknowledgment_reading", words, prosody,
                        reading=acknowledged)
    return decided(Verdict.INTERRUPTION, "other_words" if few else "too_long")


def readings_to_score(transcript: str, language: str = "en") -> tuple[str, ...]:
    """The readings the person's transcriber scores beside `transcript` for rules 4b and 4c
    (`server.listening.backchannel_readings.READINGS`, `server.listening.murmurs.READINGS`):
    for a transcript of at most `MAX_WORDS` words, no question mark and no never-word, that
    the lists do not decide (not only backchannel words, interjections and murmurs): all of
    them when it is spelled letters or spelled like one of the acknowledgments
    (`_spelled_alike`: "The ice.", "Bike right.", "Y-T"), the laughs' and interruptions' for
    other words up to `murmurs.MAX_WORDS` ("ahead" for Piper's "heh heh": 22 readings, about
    180 ms on the loaded 2-core machine, paid before such words cut the reply), "Uh-huh."
    alone for three words (rule 4a: "I have to." for Piper's "uh huh"), and for a
    laugh spelled once or twice ("Hee.", "Ha ha.": rule 4 takes one syllable of it only
    when the interruptions' are far less likely than its words or a laugh's) and for no words
    (rule 4's `no_words`: `murmurs.interruption_unheard`); otherwise none
    ("Console", three words or more, is cut at once)."""
    vocabulary = VOCABULARIES[language]
    words = normalise(transcript)
    listed = vocabulary.backchannels | vocabulary.interjections
    if not words or ("?" not in transcript and len(words) <= murmurs.MAX_WORDS
                     and _laugh_words(words, vocabulary)):
        return murmurs.READINGS
    if ("?" in transcript or _word_count(words) > MAX_WORDS
            or _never_said(words, vocabulary)
            or _covered(tuple(w for w in words if not vocabulary.murmur(w)), listed)):
        return ()
    if _spelled_letters(words, language) or any(
            _spelled_alike(transcript, reading) for reading in ACKNOWLEDGMENT_READINGS):
        return READINGS + murmurs.LAUGH_READINGS + (murmurs.UH_HUH_READING,)
    return murmurs.READINGS if len(words) <= murmurs.MAX_WORDS else (murmurs.UH_HUH_READING,)


def _laugh_words(words: tuple[str, ...], vocabulary: Vocabulary) -> bool:
    """Every word spells a laugh, one said once or again ("Hee.", "Ha!", "Ha ha."): rule 4's
    one-syllable laugh."""
    return (bool(words) and _word_count(words) == 1
            and all(vocabulary.laugh_spelling.fullmatch(word) for word in words))


def _spelled_letters(words: tuple[str, ...], language: str) -> bool:
    """Every word spells letters ("y-t", "a-e": what tiny.en writes for a sound it cannot
    read), and none is a hum (rule 4 decides those: "m-h-m"). No content: no word said."""
    vocabulary = VOCABULARIES[language]
    return bool(words) and all(_LETTERS.fullmatch(word) and not vocabulary.murmur(word)
                               for word in words)


def _acknowledgment(transcript: str, prosody: Prosody, shape: word_shape.WordShape,
                    language: str) -> str | None:
    """Rule 4b: the acknowledgment whisper found about as likely as the transcript's words
    (`backchannel_readings.acknowledgment_reading`: at least as likely as spelled letters,
    within `READING_MARGIN` of words) and far likelier than any interruption, not asked
    (`_asked`) and whose sound fits it (`backchannel_fit.fits`); else None."""
    reading = transcript.murmur if isinstance(transcript, Transcript) else None
    if _asked(transcript, prosody):
        return None
    letters = _spelled_letters(normalise(transcript), language)
    said = acknowledgment_reading(reading, 0.0 if letters else READING_MARGIN)
    if said is None or not (letters or _spelled_alike(transcript, said)):
        return None
    vocabulary = VOCABULARIES[language]
    phrases = _split(normalise(said), vocabulary.backchannels | vocabulary.interjections)
    return said if phrases is not None and backchannel_fit.fits(phrases, prosody, shape) else None


def _spelled_alike(transcript: str, reading: str) -> bool:
    """The letters of `transcript` and `reading` (spaces and punctuation dropped) match by
    `MIN_SPELLING_MATCH` or more (`difflib.SequenceMatcher.ratio`: twice the matched letters
    over both lengths)."""
    def letters(text: str) -> str:
        return "".join(ch for ch in text.lower() if ch.isalpha())
    matcher = difflib.SequenceMatcher(None, letters(transcript), letters(reading), autojunk=False)
    return matcher.ratio() >= MIN_SPELLING_MATCH


def _murmured(prosody: Prosody) -> bool:
    """Rule 4a's sound: two voiced syllables joined by an /h/ (`MIN_ASPIRATED_GAP_MS`), the
    second a repeat of the first (`MAX_REPEAT_CHANGE_DB`)."""
    return (len(prosody.nuclei) == 2 and _aspirated(prosody)
            and prosody.syllable_change_db <= MAX_REPEAT_CHANGE_DB)


def _hum_reading(transcript: str, prosody: Prosody) -> MurmurReading | None:
    """Rule 4a: the recogniser's scores of `transcript` when it found the hum reading
    ("Mm-hmm.") plausible beside its own words (`MIN_HUM_READING_LOGPROB`,
    `HUM_READING_MARGIN`), or "Uh-huh." more plausible still (`murmurs.uh_huh_misread`: the
    scores then name it), wrote no question mark, and the sound is a murmur (`_murmured`);
    else None (also for a transcript without scores: `calibration.asr.Transcript.murmur`)."""
    reading = transcript.murmur if isinstance(transcript, Transcript) else None
    if reading is None or "?" in transcript or not _murmured(prosody):
        return None
    if murmurs.uh_huh_misread(reading):
        return replace(reading, murmur_logprob=dict(reading.alternatives)["Uh-huh."],
                       murmur="Uh-huh.")
    if reading.murmur_logprob < MIN_HUM_READING_LOGPROB:
        return None
    if reading.murmur_logprob < reading.text_logprob - HUM_READING_MARGIN:
        return None
    return reading


def _by_sound(words: tuple[str, ...], transcript: str, prosody: Prosody, vocabulary: Vocabulary,
              decided: Callable[[Verdict, str], Decision]) -> Decision:
    """Rule 4: murmur words, interjections or none; the sound decides."""
    syllables = len(prosody.nuclei)
    if not words and prosody.voiced_share < NOISE_VOICED_SHARE:
        return decided(Verdict.NOISE, "noise")
    if not words:
        if not murmurs.interruption_unheard(transcript.murmur if isinstance(
                transcript, Transcript) else None):
            return decided(Verdict.INTERRUPTION, "no_words_interruption")
        return decided(Verdict.BACKCHANNEL, "no_words")
    if "?" in transcript:
        return decided(Verdict.INTERRUPTION, "question")
    laughed = all(vocabulary.laugh_spelling.fullmatch(word) for word in words)
    if syllables >= 2 and laughed and _aspirated(prosody, 0):
        return decided(Verdict.BACKCHANNEL, "laughter")
    if (syllables == 1 and words and laughed and not _asked(transcript, prosody)
            and murmurs.laugh_clear(transcript.murmur if isinstance(transcript, Transcript)
                                    else None)):
        return decided(Verdict.BACKCHANNEL, "laughter")
    if syllables == 2 and _aspirated(prosody):
        return decided(Verdict.BACKCHANNEL, "murmur_h")
    if syllables == 2 and prosody.pitch_change_st >= RISING_ST:
        return decided(Verdict.BACKCHANNEL, "murmur_rising")
    if syllables == 1 and prosody.duration_ms <= MAX_HUM_MS and words and all(
            vocabulary.hum(word) for word in words):
        if _asked(transcript, prosody):
            return decided(Verdict.INTERRUPTION, "question")
        return decided(Verdict.BACKCHANNEL, "murmur")
    return decided(Verdict.INTERRUPTION, "murmur_closure")
