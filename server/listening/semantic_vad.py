"""`semantic_vad`: whether the person has finished their turn, judged in the turn's first
pause from its sound and its words. Sans-I/O.

The VAD reports a pause (`server.listening.turn_events.SpeechPaused`, `UTTERANCE_TAIL_MS` of silence
after the speech); two verdicts on the turn up to that pause are then computed elsewhere: the
Smart Turn model's end-of-turn probability of its audio (`server.listening.smart_turn`) and the
transcript of its words (the transcription prepared at the pause, or the decision's on a paused
reply). `TurnEndJudge` combines them: words that end on a word that announces more
(`transcript_unfinished`) leave the turn to the VAD, which ends it after the eagerness's longest
silence (`server.listening.server_vad_settings.EAGERNESS_MAX_WAIT_MS`); otherwise the turn ends
after the eagerness's shortest silence when the model says it sounds finished
(`COMPLETE_PROBABILITY`), after half its longest when it does not
(`TurnDetection.end_wait_ms`). The words are needed: on
Piper- and espeak-ng-voiced prompts (measured here, 30 prompts over three voices) the model
scores a cut-off "I want to book a table for" 0.92-0.93 and "Set a timer for" 0.92-0.98, as
high as the whole sentences; text-to-speech voices fall at the end of any phrase.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

COMPLETE_PROBABILITY = 0.5
"""Smart Turn probability above which the turn sounds finished (pipecat's
`LocalSmartTurnAnalyzerV3`: `prediction = 1 if probability > 0.5`)."""

PREPOSITIONS = frozenset({
    "about", "above", "across", "after", "against", "along", "among", "around", "at",
    "before", "behind", "below", "beneath", "beside", "besides", "between", "beyond", "by",
    "despite", "during", "except", "for", "from", "in", "inside", "into", "near", "of",
    "onto", "per", "regarding", "through", "throughout", "to", "toward", "towards", "under",
    "underneath", "unlike", "until", "upon", "via", "with", "within", "without",
})
"""Prepositions that end a phrase only when their object was moved before them ("Where are
you from?"): unfinished at the end of a transcript unless it closes with "?" or "!"."""

CONTINUATION_WORDS = PREPOSITIONS | frozenset({
    # articles and determiners that need a noun
    "a", "an", "the", "my", "your", "our", "their", "its", "every", "each", "another",
    # conjunctions
    "and", "but", "or", "nor", "because", "although", "though", "if", "unless", "whether",
    "while", "whereas", "than", "so", "yet", "that", "which", "who", "whose", "where", "when",
    # fillers
    "um", "umm", "uh", "uhh", "er", "erm", "ah", "like",
})
"""A transcript whose last word is one of these is not a finished turn: a preposition, an
article or determiner, a conjunction or a filler announces more words (DESIGN.md 6). Words
that often close a sentence ("on", "off", "up", "out", "over", "since", "his", "this") are
left out."""

NOUN_DETERMINERS = frozenset({
    "a", "an", "the", "my", "your", "our", "their", "his", "her", "its", "every", "each",
    "another",
})
"""Determiners that open a noun phrase ("this" and "that" are left out: they stand alone as
pronouns, "What is this made of?"). "of" after such a phrase ("What is the capital of?",
"What's the best part of?") is unfinished even before "?": whisper punctuates a "what"
question it heard cut off as a question (a tester's Piper "What is the capital of" (1.2 s)
"Australia?" was two turns, 3 of 3), and "of" strands after a noun only in rare questions
("Which city is it the capital of?", which then waits the eagerness's longest silence)."""

_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")
_TRAILING_OPEN = re.compile("(\\.\\.\\.|\u2026|,|-|\u2014|\u2013)\\s*$")
_CLOSED_QUESTION = re.compile(r"[?!]\s*$")


def transcript_unfinished(transcript: str) -> bool:
    """True when `transcript` (ASR text, any case and punctuation) ends on a word of
    `CONTINUATION_WORDS` (a preposition not before "?" or "!", but "of" after a noun phrase
    opened by one of `NOUN_DETERMINERS` one or two words before it), or on a comma, dash or
    ellipsis (whisper writes "for..." for a phrase that breaks off). An empty transcript is
    not unfinished."""
    if _TRAILING_OPEN.search(transcript):
        return True
    words = _WORD.findall(transcript.lower())
    if not words or words[-1] not in CONTINUATION_WORDS:
        return False
    if words[-1] == "of" and NOUN_DETERMINERS.intersection(words[-4:-2]):
        return True
    return words[-1] not in PREPOSITIONS or not _CLOSED_QUESTION.search(transcript)


@dataclass(frozen=True, slots=True)
class TurnEndVerdict:
    """The verdict on a turn whose words end like a finished phrase.

    Attributes:
        audio_end_ms: the end of the speech before the judged pause (ms, input timeline).
        sounds_finished: the end-of-turn model agrees (probability > `COMPLETE_PROBABILITY`);
            False: the words look finished, the sound does not.
    """

    audio_end_ms: int
    sounds_finished: bool


class TurnEndJudge:
    """One session's end-of-turn verdict on its turn's latest pause.

    A pause is named by (item id, `audio_end_ms`: the end of the speech before it, ms on the
    input timeline). Feed the model's probability (`probability`) and the transcript
    (`transcript`) of the turn up to that pause, in any order; the call that completes both
    returns a `TurnEndVerdict` when the words do not announce more (`transcript_unfinished`),
    once per pause, else None. A verdict for another pause than the latest replaces what was
    known; `resumed` forgets the pause (the person spoke on).
    """

    def __init__(self) -> None:
        self._pause: tuple[str, int] | None = None
        self._probability: float | None = None
        self._transcript: str | None = None

    def resumed(self) -> None:
        """Speech came back: no verdict on the pause before it counts any more."""
        self._pause = None

    def probability(self, item_id: str, audio_end_ms: int,
                    probability: float) -> TurnEndVerdict | None:
        """Smart Turn's end-of-turn `probability` (0-1) of the turn `item_id` up to its pause
        after `audio_end_ms` (ms); the verdict when it is now complete."""
        self._at((item_id, audio_end_ms))
        self._probability = probability
        return self._verdict()

    def transcript(self, item_id: str, audio_end_ms: int | None,
                   transcript: str) -> TurnEndVerdict | None:
        """The `transcript` of the turn `item_id` up to its pause after `audio_end_ms` (ms; None:
        the latest pause, ignored when there is none); the verdict when it is now complete."""
        if audio_end_ms is None:
            if self._pause is None or self._pause[0] != item_id:
                return None
            audio_end_ms = self._pause[1]
        self._at((item_id, audio_end_ms))
        self._transcript = transcript
        return self._verdict()

    def _at(self, pause: tuple[str, int]) -> None:
        if self._pause != pause:
            self._pause = pause
            self._probability = self._transcript = None

    def _verdict(self) -> TurnEndVerdict | None:
        pause = self._pause
        if pause is None or self._probability is None or self._transcript is None:
            return None
        self._pause = None
        if transcript_unfinished(self._transcript):
            return None
        return TurnEndVerdict(pause[1], self._probability > COMPLETE_PROBABILITY)
