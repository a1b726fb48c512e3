"""Rule 4b of `server.listening.backchannel`: an acknowledgment the ASR wrote as spelled letters,
found by the recogniser's own scores of the acknowledgment's reading.

tiny.en's greedy decode of a short acknowledgment is sometimes letters: "Y-T" for espeak-ng
en-gb-scotland's "oh I see", "A-E, A-E." for en-us+f2's "I see, I see" (a tester, issue 24).
Forced to read the same audio as the acknowledgment (`calibration.asr_readings`:
`MurmurReading.alternatives`), the decoder finds that reading likelier than its letters: its
greedy search missed it. That is taken as the acknowledgment when, in the same scores, every
interruption's reading ("Stop.", "Wait.", "Nope.", "Hold on.", ...) is far less likely
(`MIN_INTERRUPTION_MARGIN`).

Why only letters: on words the scores do not separate. Measured (tiny.en, the person's 15 s
window, the audio a pause over a reply is decided on; Piper and espeak-ng en-us+m3, en-us+f2,
en-gb-scotland, en-029, en-gb-x-rp): misread acknowledgments find their reading likelier than
their words by 0.01-0.48 ("shorting" for "sure thing", "Oh my feet." and "Y-T" for "oh I see",
"Bike right." for Piper's "right right"), but so does "copy", tiny.en's reading of
en-gb-scotland's "coffee", with "Got it." (-0.17 to +0.68 from take to take), while of 150 other
real words and interruptions said alone ("kill", "seven", "Tuesday", "mom", "name", "me too",
"that's it", "nope", "why?", ...) none passed both tests. Hum and laugh readings are not used:
whisper finds "Mm-hmm." and "Hee hee." as likely for "mom", "name", "key" and "he" as for a hum
or a laugh (rule 4a judges hums by their sound instead). Misread interruptions keep their own
reading likely ("Build" for "nope": 1.21 below "Nope."). Cost: one decoder pass per reading
(`READINGS`, 23: about 0.1-0.2 s on a loaded 2-core machine), only for a transcript of
spelled letters (`server.listening.backchannel.readings_to_score`), while the resume waits for
the person to be done anyway (`server.realtime.pauses`).
"""

from __future__ import annotations

from calibration.asr_readings import MurmurReading

ACKNOWLEDGMENT_READINGS = (" Oh, I see.", " I see.", " Cool.", " Nice.", " Sure thing.",
                           " Got it.", " Got it, thanks.", " Gotcha.", " Right, right.",
                           " Yep.", " Okay.", " Makes sense.", " Fair enough.")
"""Acknowledgments scored (whisper's spelling, with its leading space): those a tester heard
misread, and the list's common ones."""

INTERRUPTION_READINGS = (" Stop.", " Wait.", " No.", " Nope.", " Hold on.", " Hang on.",
                         " Excuse me.", " What?", " Why?", " Uh-uh.", " But wait.", " Pause.",
                         " Hey.", " Sorry.", " Enough.", " One second.", " Listen.")
"""Interruptions scored beside them: the issue's and the tester's."""

READINGS = ACKNOWLEDGMENT_READINGS + INTERRUPTION_READINGS
"""Every reading scored for rule 4b, in this order."""

MIN_INTERRUPTION_MARGIN = 1.0
"""The acknowledgment's reading must be likelier than every interruption's by this much (mean
token log probability, natural log). Measured: the misread acknowledgments 1.75-2.5; misread
interruptions below 0 ("Build" for "nope": -1.21; "8.0." for "yeah but wait": -0.54)."""


def acknowledgment_reading(reading: MurmurReading | None, margin: float = 0.0) -> str | None:
    """The acknowledgment (stripped, "Oh, I see.") whisper finds at most `margin` (mean token
    log probability) less likely than its own words and likelier than every interruption by
    `MIN_INTERRUPTION_MARGIN`, from the scores of `READINGS` in `reading.alternatives`; None
    when there is none, or the readings were not scored (another transcriber, long audio, a
    transcript the word lists decide)."""
    if reading is None or not reading.alternatives:
        return None
    scores = dict(reading.alternatives)
    acknowledgments = [(scores[r.strip()], r.strip()) for r in ACKNOWLEDGMENT_READINGS
                       if r.strip() in scores]
    interruptions = [scores[r.strip()] for r in INTERRUPTION_READINGS if r.strip() in scores]
    if not acknowledgments or not interruptions:
        return None
    best, said = max(acknowledgments)
    if (best < reading.text_logprob - margin
            or best < max(interruptions) + MIN_INTERRUPTION_MARGIN):
        return None
    return said
