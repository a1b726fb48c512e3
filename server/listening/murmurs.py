"""Murmurs and laughs tiny.en misreads, judged on whisper's own readings of the audio
(`server.listening.backchannel`): laughter read as words (rule 4c, `laugh_reading`; a one-beat
laugh, `laugh_clear`), "uh-huh" read as words (rule 4a, `uh_huh_misread`), and audio read as no
words that is a misheard interruption, not a murmur (rule 4, `interruption_unheard`).

A laugh is breathy /h/ + vowel beats said again and again: "heh heh", "hee hee", "ha ha". tiny.en
writes some laughs as words: "ahead" for Piper's "heh heh" (two beats 30 ms apart), "KK" for
espeak-ng en-us+m3's "hee hee" (issue 24). Two things, both needed, make such words a laugh:

- *The sound is a laugh*: two or more voiced nuclei (`Prosody.nuclei`), every gap between them
  aspirated (an /h/ keeps sounding: `prosody.Gap.aspirated`, any length, as rule 4's laughter:
  Piper's "heh heh" has a 30 ms /h/), each beat a repeat of the first
  (`Prosody.syllable_change_db` at most `MAX_LAUGH_CHANGE_DB`), and no question's rise.
- *whisper hears a laugh*: forced to read the audio as a laugh (`LAUGH_READINGS`, scored by the
  person's transcriber, `calibration.asr_readings`), it finds that at least as likely as its own
  words and likelier than every interruption's reading
  (`backchannel_readings.INTERRUPTION_READINGS`) by `MIN_LAUGH_MARGIN`.

The sound alone is not enough: "hey hey", "hello" and "anyhow" are /h/ words of repeated or
similar beats; whisper's scores alone are not either: it finds "Heh heh." plausible for many
short sounds. A hum misread as one word ("Amen." for Piper's "mm", "in" for espeak-ng en-029's,
"him." for en-us+f5's "Hmm.") is not taken here: whisper scores "Mm-hmm." as likely for the
names and nasal words "mom", "Anne", "Ben", "Tim", "nine" said alone (measured, tiny.en, the
person's 15 s window: the hum reading within 0.4 of the words and 1.0-1.8 above every
interruption), which must cut, and their sound is one voiced nucleus like the hum's.
"""

from __future__ import annotations

from calibration.asr_readings import MurmurReading
from server.listening.backchannel_readings import INTERRUPTION_READINGS, MIN_INTERRUPTION_MARGIN
from server.listening.prosody import Prosody

LAUGH_READINGS = (" Ha ha.", " Ha ha ha.", " Heh heh.", " Hee hee.")
"""Laughs scored (whisper's spelling, with its leading space): the likeliest for every laugh of
`benchmarks/bench_backchannel.py`'s recordings and the tests' was one of these."""

UH_HUH_READING = " Uh-huh."
"""Rule 4a's second murmur reading (`uh_huh_misread`)."""

READINGS = LAUGH_READINGS + INTERRUPTION_READINGS + (UH_HUH_READING,)
"""Every reading scored for rules 4a (beside `calibration.asr_readings.MURMUR_READINGS`) and 4c,
in this order."""

MIN_UH_HUH_LOGPROB = -1.4
"""Rule 4a on "Uh-huh." (`uh_huh_misread`): its reading must be at least this likely (mean
token log probability, natural log). Measured (tiny.en, the person's 15 s window): Piper's "uh
huh" over babble and a TV at -45 dBFS, read "I had", "I have...", "I have to...", -0.93 to
-1.12; espeak-ng en-029's "I have" and "I had" (read "I am", "I have."; two alike syllables
joined by /h/) -1.98 and -1.99, Piper's "a hug" -1.94, other two-syllable words -2.4 and
below. Stricter than "Mm-hmm."'s `backchannel.MIN_HUM_READING_LOGPROB`: whisper finds
"Uh-huh." plausible for more words than "Mm-hmm."."""

UH_HUH_MARGIN = 0.9
"""Rule 4a on "Uh-huh.": its reading may be at most this much less likely than the transcript's
own words. Measured: Piper's "uh huh" over a TV read "I had" 0.60 below its words (0.76 under
`calibration.cpu_numerics`: answered at 0.7), over babble above them; espeak-ng en-029's "I
have" read "I am" 1.35 below, "I had" read "I have." 0.84. The words whisper could read as
"Uh-huh." (`tests/test_backchannel_murmurs.py`: "I have", "I had", "a hug", "I hope", ...) have
it at -2.0 and below, under `MIN_UH_HUH_LOGPROB`, which keeps them out."""

MIN_LAUGH_MARGIN = 0.6
"""Rule 4c: the laugh's reading must be likelier than every interruption's by this much (mean
token log probability, natural log), beside being at least as likely as the transcript's own
words. Piper's "Heh heh." (read "ahead") has it 1.025 above "Hang on." under
`calibration.cpu_numerics`, 0.88 with one least significant bit of noise on a tenth of its
samples (the kind of difference onnxruntime makes between CPUs: it was under 1.0 on CI's AMD
machine); the /h/ words of the tests ("hey hey", "hello", "anyhow", "ahead") have their laugh
readings below their own words, which keeps them out whatever this margin."""

MAX_WORDS = 2
"""Rule 4c reads transcripts of at most this many words: a misread laugh came back as one or
two ("ahead", "KK", "Hit hit.")."""

MAX_LAUGH_CHANGE_DB = 5.0
"""Largest `Prosody.syllable_change_db` of a laugh's beats: one sound said again. Measured on
espeak-ng and Piper laughs ("ha ha", "heh heh", "hee hee", "haha", "hehe"): 0.7-4.6 dB, and 6.0
and 6.9 for espeak-ng en-us+f5's and en-us+f2's "hee hee" (read "Hee-e" and "P.D.", which whisper
prefers to the laugh anyway); "okay", "perfect", "anyhow": 6-16 dB (`backchannel`'s
`MAX_REPEAT_CHANGE_DB`)."""

NO_WORDS_MARGIN = 0.4
"""Rule 4's `no_words` (`interruption_unheard`): the likeliest murmur or laugh reading of audio
with no words must be this much likelier than every interruption's (mean token log
probability, natural log). Measured: 0.10 for espeak-ng en-gb-scotland's "hey", 0.50 and more
for laughs and murmurs read as nothing."""


def uh_huh_misread(reading: MurmurReading | None) -> bool:
    """Rule 4a's "Uh-huh." reading: scored (`UH_HUH_READING` in `reading.alternatives`), at least
    `MIN_UH_HUH_LOGPROB` and within `UH_HUH_MARGIN` of the transcript's words. The sound is
    judged by the caller (two alike syllables joined by an /h/)."""
    if reading is None:
        return False
    score = dict(reading.alternatives).get(UH_HUH_READING.strip())
    return (score is not None and score >= MIN_UH_HUH_LOGPROB
            and score >= reading.text_logprob - UH_HUH_MARGIN)


def laugh_reading(reading: MurmurReading | None, prosody: Prosody,
                  asked: bool) -> str | None:
    """Rule 4c: the laugh (stripped, "Heh heh.") whisper hears in an utterance its transcript
    reads as words, or None.

    Args:
        reading: the transcriber's scores of the transcript and of `READINGS`
            (`MurmurReading.alternatives`); None or without them: None.
        prosody: the utterance's prosody.
        asked: the ASR wrote a question mark or the pitch rose at the end.

    Returns:
        The likeliest of `LAUGH_READINGS` when the sound is a laugh and whisper hears one (the
        module docstring), else None.
    """
    if asked or reading is None or not reading.alternatives or not _laugh_sound(prosody):
        return None
    scores = dict(reading.alternatives)
    laughs = [(scores[r.strip()], r.strip()) for r in LAUGH_READINGS if r.strip() in scores]
    interruptions = [scores[r.strip()] for r in INTERRUPTION_READINGS if r.strip() in scores]
    if not laughs or not interruptions:
        return None
    best, laugh = max(laughs)
    if best < reading.text_logprob or best < max(interruptions) + MIN_LAUGH_MARGIN:
        return None
    return laugh


def laugh_clear(reading: MurmurReading | None) -> bool:
    """Rule 4's one-syllable laugh ("Hee!", "Hehe", "Ha ha." said as one beat): whisper finds
    the transcript's own words, or a laugh's reading (`LAUGH_READINGS`), likelier than every
    interruption's reading (`INTERRUPTION_READINGS` in `reading.alternatives`) by
    `MIN_INTERRUPTION_MARGIN`; False when they were not scored. Measured: espeak-ng en-029's
    one "hee" read "Hee!" (-1.63) has "Hey!" 1.25 below it; Piper's "hee hee" at length scale
    1.2, one beat read "Hehe" (-2.12), has "Hee hee." at -1.23, every interruption at -2.95
    or below; en-gb-scotland's "hey" read "Hey." (-2.14), "Hee." in another take, has its
    words and "Hey." within 0.3 of each other, and the readings of every "hey" of the tests
    (Piper, five espeak-ng voices) put each laugh 1.7-2.6 below "Hey."."""
    if reading is None or not reading.alternatives:
        return False
    scores = dict(reading.alternatives)
    interruptions = [scores[r.strip()] for r in INTERRUPTION_READINGS if r.strip() in scores]
    laughs = [scores[r.strip()] for r in LAUGH_READINGS if r.strip() in scores]
    return bool(interruptions) and (max([reading.text_logprob, *laughs])
                                    >= max(interruptions) + MIN_INTERRUPTION_MARGIN)


def interruption_unheard(reading: MurmurReading | None) -> bool:
    """Rule 4's `no_words`: audio with no words holds the reply unless whisper, forced to read
    it, finds an interruption (`INTERRUPTION_READINGS` but "Uh-uh.", which it scores like
    "Uh-huh." and a laugh) within `NO_WORDS_MARGIN` of - or above - the likeliest murmur or
    laugh reading (`MurmurReading.murmur_logprob`, `LAUGH_READINGS`). True (held) when the
    readings were not scored (another transcriber, long audio).

    Measured (tiny.en, the person's 15 s window, as a pause over a reply decides it):
    espeak-ng en-gb-scotland's "hey", read as nothing, has "Hey." 0.10 below "Hee hee."; the
    laughs and murmurs read as nothing (espeak-ng en-gb-x-gbcwmd's "heh", "ha ha", "haha",
    "ha ha ha", en-us+f5's and en-us+f2's "heh heh", en-gb-scotland's "hehe") put every such
    interruption 0.50-1.90 below their best reading."""
    if reading is None or not reading.alternatives:
        return True
    scores = dict(reading.alternatives)
    interruptions = [scores[r.strip()] for r in INTERRUPTION_READINGS
                     if r.strip() in scores and r.strip() != "Uh-uh."]
    laughs = [scores[r.strip()] for r in LAUGH_READINGS if r.strip() in scores]
    return not interruptions or (max([reading.murmur_logprob, *laughs])
                                 >= max(interruptions) + NO_WORDS_MARGIN)


def _laugh_sound(prosody: Prosody) -> bool:
    """Two or more voiced beats, every gap aspirated, each a repeat of the first."""
    return (len(prosody.nuclei) >= 2 and all(gap.aspirated for gap in prosody.gaps)
            and prosody.syllable_change_db <= MAX_LAUGH_CHANGE_DB)
