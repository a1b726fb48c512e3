"""Does the sound fit the acknowledgment the ASR wrote? (`server.listening.backchannel`)

tiny.en writes a listed acknowledgment for some real interruptions: "Of course." for Piper's
"pause", "Okay." for espeak-ng en-029's "hey", "Yeah." for espeak-ng en-gb-x-rp's "enough"
(issue 24; a tester, and `benchmarks/bench_backchannel.py`'s interruption grid). Whisper
itself is sure of them: forced to read the audio as the interruption
(`calibration.asr_readings`), it scores "Pause." 0.8 below "Of course." (mean token log
probability), "Enough." 1.4 below "Yeah.", while real acknowledgments misread by the same
model ("Cool" for espeak-ng's "cool": an interruption's reading 0.26 below its words) come as
close: the readings cannot veto them. Their sound does not fit the words:

- *Two beats.* A phrase with a voiceless consonant between two vowels ("okay", "of course",
  "perfect", "I see", "makes sense", "sure thing") sounds as two voiced syllable
  nuclei or more (`Prosody.nuclei`): measured on every such acknowledgment of the benchmark's
  recordings, Piper and eight espeak-ng voices, 2-3 nuclei (gaps 60-270 ms, 12-37 dB down).
  "pause" and "hey" are one nucleus.
- *Ends voiced.* A phrase that ends on a vowel or a voiced sonorant ("yeah", "okay", "cool",
  "I see") leaves at most `MAX_VOICELESS_TAIL_MS` of audible sound after its last nucleus;
  "enough" read "Yeah." ends with 200 ms of its /f/ ("thanks" and "right", which end
  voiceless, 50-190 ms, are not checked). The price: espeak-ng en-us and en-gb-x-rp's "yep",
  read "Yeah." with 210-220 ms of /p/ after the vowel, are cut too.

A transcript of listed words whose sound does not fit is an interruption (safety first: a
wrongly resumed "stop" is far worse than a wrongly answered "mm-hmm"). Phrases not named here
are not checked.
"""

from __future__ import annotations

from server.listening.prosody import Prosody

TWO_BEATS = frozenset({
    "okay", "ok", "o.k", "of course", "perfect", "i see", "oh i see", "makes sense",
    "make sense", "that makes sense", "sure thing", "got it thanks", "thank you",
    "thanks a lot", "exactly", "excellent", "absolutely", "definitely",
    "understood", "i understand", "that's right", "that's true", "that's good", "that's great",
    "that's fair", "for sure", "interesting",
})
"""Acknowledgments (English, normalised) with a voiceless consonant between two full vowels:
their sound has two voiced nuclei or more. Not "gotcha": its weak last vowel is shorter than a
nucleus (`prosody.MIN_NUCLEUS_MS`) in some takes of espeak-ng en-029's."""

VOICED_ENDINGS = frozenset({
    "yeah", "yay", "okay", "ok", "o.k", "k", "see", "i see", "oh i see", "cool", "true",
    "sure", "wow", "go on", "i know", "really", "fine", "thank you", "got you",
    "totally", "absolutely", "definitely", "agreed", "lovely", "amazing", "that's true",
    "i hear you", "that's fair", "for sure",
})
"""Acknowledgments (English, normalised) that end on a vowel or a voiced sonorant."""

MAX_VOICELESS_TAIL_MS = 180
"""Longest audible sound (ms) after the last voiced nucleus of a phrase in `VOICED_ENDINGS`
(`Prosody.sound_end_ms` less the last nucleus's end). Measured on
`benchmarks/bench_backchannel.py`'s recordings and more (Piper and seven espeak-ng voices, as
the server decides them): "yeah", "okay", "oh okay", "cool", "sure", "I see", "oh I see"
10-80 ms, but 160 ms for espeak-ng en-gb-x-rp's "uh-huh yeah" read "Oh yeah." (its voicing
fades before the vowel ends); "enough" read "Yeah.", 200 ms; "yep" read "Yeah.", 210-220 ms."""


def fits(phrases: tuple[str, ...], prosody: Prosody) -> bool:
    """True unless the sound contradicts the acknowledgment `phrases` (normalised listed
    phrases in the order said, as `server.listening.backchannel` split the transcript):
    fewer than two nuclei for a phrase of `TWO_BEATS`, or more than `MAX_VOICELESS_TAIL_MS`
    of sound after the last nucleus when the last phrase is in `VOICED_ENDINGS`. A sound
    without voiced nuclei is not judged (True): the words decide, as before this check."""
    if not prosody.nuclei:
        return True
    if any(phrase in TWO_BEATS for phrase in phrases) and len(prosody.nuclei) < 2:
        return False
    tail_ms = prosody.sound_end_ms - prosody.nuclei[-1][1]
    return not (phrases and phrases[-1] in VOICED_ENDINGS and tail_ms > MAX_VOICELESS_TAIL_MS)
