"""Does the sound fit the acknowledgment the ASR wrote? (`server.listening.backchannel`)

tiny.en writes a listed acknowledgment for some real interruptions: "Of course." for Piper's
"pause", "Okay." for espeak-ng en-029's "hey", "Yeah." for espeak-ng en-gb-x-rp's "enough"
(issue 24; a tester, and `benchmarks/bench_backchannel.py`'s interruption grid). Whisper
itself is sure of them: forced to read the audio as the interruption
(`calibration.asr_readings`), it scores "Pause." 0.8 below "Of course." (mean token log
probability), "Enough." 1.4 below "Yeah.", while real acknowledgments misread by the same
model ("Cool" for espeak-ng's "cool": an interruption's reading 0.26 below its words) come as
close: the readings cannot veto them. Their sound does not fit the words:

- *Two beats.* A phrase with a consonant between two vowels ("okay", "of course",
  "perfect", "I see", "makes sense", "sure thing") sounds as two vowel beats or more
  (`server.listening.word_shape`; every such acknowledgment in Piper at length scales
  0.8-1.3 and eight espeak-ng voices at 130-230 words a minute: 2-4). Not voiced nuclei
  (`Prosody.nuclei`): Piper's vowels often miss their voicing threshold, so that its "okay",
  "I see", "perfect", "of course" at length scale 0.8 are one nucleus, and Piper's "pause"
  at 1.3 is two. "pause", "hey", "stop", "wait", "no",
  "nope" are one beat in Piper at length scales 0.8-1.3 and seven espeak-ng voices at
  130-230 words a minute.
- *Ends on its vowel.* A phrase that ends on a vowel or a voiced sonorant ("yeah", "okay",
  "cool", "I see") leaves at most `MAX_VOICELESS_TAIL_MS` of audible sound after its last
  vowel, a stop's closure and release counted to the closure (espeak-ng's "yep" and "yup",
  read "Yeah."), and no fricative (`MIN_FRICATIVE_TAIL_MS`): "enough" read "Yeah." ends
  with its /f/ ("thanks" and "right", which end voiceless, are not checked).
- *No more beats than its words.* An acknowledgment sounds as at most one vowel beat more
  than its syllables (`calibration.units.syllables`, which counts a vowel group as one and
  never fewer than said; one spare beat for a vowel split in two). More is more said: a
  tester's Piper "Right, but why?" (three beats, a 260 ms pause after "Right,") was read
  "right." (the decision's audio, over a -20 dB echo) and "Right, the white." (taken for a
  misread "Right.", rule 4b) and resumed the reply 2 of 5 times; the question was never
  answered. Measured (Piper and five espeak-ng voices): "right", "yeah", "sure", "cool",
  "thanks" one beat (en-gb-x-rp "thanks" two), "okay", "I see", "got it", "perfect",
  "yeah yeah", "right, right" two, "exactly", "oh, I see", "that makes sense" three;
  "Right, but why?", "Yeah, but wait.", "Sure, but when?" three, "Okay, and then?" three to
  four, "Mm-hmm, so what about Sunday?" seven to nine.

A transcript of listed words whose sound does not fit is an interruption (safety first: a
wrongly resumed "stop" is far worse than a wrongly answered "mm-hmm"). Phrases not named here
are not checked.
"""

from __future__ import annotations

from calibration.units import syllables
from server.listening.prosody import Prosody
from server.listening.word_shape import WordShape

TWO_BEATS = frozenset({
    "okay", "ok", "o.k", "of course", "perfect", "i see", "oh i see", "makes sense",
    "make sense", "that makes sense", "it makes sense", "sure thing", "got it thanks",
    "thank you", "thanks a lot", "exactly", "excellent", "absolutely", "definitely",
    "understood", "i understand", "that's right", "that's true", "that's good", "that's great",
    "that's fair", "for sure", "interesting", "got it", "i got it", "i get it", "got you",
    "agreed", "aha", "all good", "all right", "awesome", "fair point", "good point",
    "good to know", "i hear you", "lovely", "point taken", "right on", "sound good",
    "sounds good", "totally", "uh-huh yeah", "very good", "you bet",
})
"""Acknowledgments (English, normalised) whose sound has two vowel beats or more: those with a
voiceless consonant between two full vowels, and the listed ones of two syllables or more
measured so in Piper at length scales 0.8, 1.0 and 1.3 and seven espeak-ng voices (en-us,
en-029, en-us+f3, en-gb-x-rp, en-us+m3, en-gb-scotland, en-us+m7) at 130, 175 and 230 words a
minute (24 takes each; "I got it", "I get it" and "good to know" three beats or more in most).
A tester's Piper "Stop." in a street (traffic at -30 dBFS RMS, the word about 7 dB above it)
was read "Got it." and resumed the reply; "stop", "wait", "no", "hey", "pause" and "nope" are
one beat in all 24. "got it" is listed although 2 of its 24 takes are one beat (Piper at 0.8,
en-gb-scotland at 230: answered, not resumed; the safe side). Not listed, as some takes are
one beat and would be answered: "gotcha" (2 of 24), "alright", "amazing", "really" (3: Piper),
"brilliant" (5), "fair enough", "indeed" (2), "i know" (6), "go on" (19: its vowels run
together)."""


VOICED_ENDINGS = frozenset({
    "yeah", "yay", "okay", "ok", "o.k", "k", "see", "i see", "oh i see", "cool", "true",
    "sure", "wow", "go on", "i know", "really", "fine", "thank you", "got you",
    "totally", "absolutely", "definitely", "lovely", "amazing", "that's true",
    "i hear you", "that's fair", "for sure",
})
"""Acknowledgments (English, normalised) that end on a vowel or a voiced sonorant (not on a
stop: the release of the /d/ of espeak-ng's "agreed" is 20 ms of fricative noise)."""

SPARE_BEATS = 1
"""Vowel beats an acknowledgment's sound may have beyond its words' syllables: a vowel split
in two by a dip in its level (en-gb-x-rp's "thanks"), a word said twice and written once
(tiny.en's "Yeah." for "yeah yeah"). See the module docstring's third check."""

MAX_VOICELESS_TAIL_MS = 180
"""Longest audible sound (ms) after the last vowel of a phrase in `VOICED_ENDINGS`
(`WordShape.tail_ms`: a stop's closure and release count up to the closure). Measured on
`benchmarks/bench_backchannel.py`'s recordings and more (Piper and seven espeak-ng voices, as
the server decides them): "yeah", "okay", "oh okay", "cool", "sure", "I see", "oh I see"
10-80 ms, but 160 ms for espeak-ng en-gb-x-rp's "uh-huh yeah" read "Oh yeah." (its voicing
fades before the vowel ends); "yep" and "yup" read "Yeah." 0-140 ms (to their /p/'s closure;
210-270 ms with the release, which an earlier rule counted, and cut them)."""
MIN_FRICATIVE_TAIL_MS = 20
"""Fricative sound (ms, `WordShape.fricative_ms`) after the last vowel that a phrase in
`VOICED_ENDINGS` cannot have. Measured (Piper at length scales 0.8-1.3, espeak-ng en-us,
en-gb-x-rp, en-us+f3, en-us+m3, en-029 and en-gb-scotland at 130-230 words a minute): "yeah",
"yep", "yup", "okay", "I see", "sure", "cool", "true" 0 ms; "enough" 20-110 ms (read "Yeah."
by tiny.en from espeak-ng en-us at 130 and en-gb-x-rp at 230 words a minute with 140-160 ms of
tail, under `MAX_VOICELESS_TAIL_MS`: they resumed), "pause" 60-130 ms."""


def fits(phrases: tuple[str, ...], prosody: Prosody, shape: WordShape) -> bool:
    """True unless the sound contradicts the acknowledgment `phrases` (normalised listed
    phrases in the order said, as `server.listening.backchannel` split the transcript):
    fewer than two vowel beats (`shape`; without beats, voiced nuclei: `prosody`) for a
    phrase of `TWO_BEATS`; for a last phrase in `VOICED_ENDINGS`, more than
    `MAX_VOICELESS_TAIL_MS` of sound or `MIN_FRICATIVE_TAIL_MS` of a fricative after the last
    vowel (without beats: sound after the last voiced nucleus); more beats than the phrases'
    syllables and `SPARE_BEATS` (the person said more than the words). A sound with neither
    beats nor nuclei is not judged (True): the words decide, as before this check."""
    if not shape.beats and not prosody.nuclei:
        return True
    beats = len(shape.beats) if shape.beats else len(prosody.nuclei)
    if any(phrase in TWO_BEATS for phrase in phrases) and beats < 2:
        return False
    if phrases and beats > sum(syllables(word) for phrase in phrases
                               for word in phrase.split()) + SPARE_BEATS:
        return False
    tail_ms = (shape.tail_ms if shape.beats
               else prosody.sound_end_ms - prosody.nuclei[-1][1])
    return not (phrases and phrases[-1] in VOICED_ENDINGS and (
        tail_ms > MAX_VOICELESS_TAIL_MS or shape.fricative_ms >= MIN_FRICATIVE_TAIL_MS))
