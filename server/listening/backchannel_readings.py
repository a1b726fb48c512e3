"""Rule 4b of `server.listening.backchannel`: an acknowledgment the ASR wrote as spelled letters
or misread as other words, found by the recogniser's own scores of the acknowledgment's reading.

tiny.en's greedy decode of a short acknowledgment is sometimes letters: "Y-T" for espeak-ng
en-gb-scotland's "oh I see", "A-E, A-E." for en-us+f2's "I see, I see" (a tester, issue 24).
Forced to read the same audio as the acknowledgment (`calibration.asr_readings`:
`MurmurReading.alternatives`), the decoder finds that reading likelier than its letters: its
greedy search missed it. That is taken as the acknowledgment when, in the same scores, every
interruption's reading ("Stop.", "Wait.", "Nope.", "Hold on.", ...) is far less likely
(`MIN_INTERRUPTION_MARGIN`).

On words the scores alone do not separate. Measured (tiny.en, the person's 15 s window, the
audio a pause over a reply is decided on; Piper and espeak-ng voices): misread acknowledgments
find their reading likelier than their words by up to 0.48 ("shorting" for "sure thing", "Oh my
feet." and "Y-T" for "oh I see", "Bike right." for Piper's "right right") or a little less
likely ("The ice." for "nice": 0.40-0.44), but "copy", tiny.en's reading of en-gb-scotland's
"coffee", scores "Got it." as likely (-0.17 to +0.68 from take to take). So words are taken
only within `backchannel.READING_MARGIN` and when spelled like the acknowledgment
(`backchannel.MIN_SPELLING_MATCH`: "copy" / "Got it." 0.22), and misread interruptions keep
their own reading likely ("Build" for "nope": 1.21 below "Nope."; the interruption grid of
`benchmarks/bench_backchannel.py`: none passed). Hum and laugh readings are not used: whisper
finds "Mm-hmm." and "Hee hee." as likely for "mom", "name", "key" and "he" as for a hum or a
laugh (rule 4a judges hums by their sound instead).

Cost: one decoder pass per reading (`READINGS`, 33; batching them in one `align` call was 4-8
times slower), measured side by side on six short misreads at load 9.7 on the 2-core machine:
230 ms median (p90 525) over a transcription of 179 ms, about 8 ms a reading. Paid only for a
transcript the word lists do not decide that is spelled letters or spelled like an
acknowledgment (`server.listening.backchannel.readings_to_score`: 38 of the 476 decisions of
the benchmark's recordings), while the resume waits for the person to be done anyway
(`server.realtime.pauses`); the cut of such a misread interruption comes that much later.
"""

from __future__ import annotations

from calibration.asr_readings import MurmurReading

ACKNOWLEDGMENT_READINGS = (" Oh, I see.", " I see.", " Cool.", " Nice.", " Sure thing.",
                           " Got it.", " Got it, thanks.", " Gotcha.", " Right, right.",
                           " Yep.", " Okay.", " Makes sense.", " Fair enough.", " True.",
                           " Of course.", " Sounds good.")
"""Acknowledgments scored (whisper's spelling, with its leading space): those a tester heard
misread, the list's common ones, and those tiny.en misreads as words spelled like them
(Piper's "true" read "Truth.", espeak-ng's "of course" read "I'm coarse.", "I'm close.",
"sounds good" read "Sound is good.")."""

INTERRUPTION_READINGS = (" Stop.", " Wait.", " No.", " Nope.", " Hold on.", " Hang on.",
                         " Excuse me.", " What?", " Why?", " Uh-uh.", " But wait.", " Pause.",
                         " Hey.", " Sorry.", " Enough.", " One second.", " Listen.")
"""Interruptions scored beside them: the issue's and the tester's."""

READINGS = ACKNOWLEDGMENT_READINGS + INTERRUPTION_READINGS
"""Every reading scored for rule 4b, in this order."""

MIN_INTERRUPTION_MARGIN = 0.9
"""The acknowledgment's reading must be likelier than every interruption's by this much (mean
token log probability, natural log); also rule 4's one-beat laughs (`murmurs.laugh_clear`; rule
4c has its own, `murmurs.MIN_LAUGH_MARGIN`). 0.9 under `calibration.cpu_numerics` (1.0 before).
Measured: the misread acknowledgments 1.75-2.5 ("The ice.", "Bike right.", "shorting" 1.6-2.4);
misread interruptions below 0 ("Build" for "nope": -1.21; "8.0." for "yeah but wait": -0.54;
"Harden" for "pardon": "Pardon?" 0.8 above any acknowledgment)."""


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

