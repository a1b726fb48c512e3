"""Voices for text the main voice cannot speak: each run of another script goes to an
espeak-ng voice of that script's language.

The English voices (Piper's `en_US` voice, espeak-ng `en-us`) read a Chinese character as
"Chinese letter" and Cyrillic, Greek, Hangul... letter by letter or not at all. `script_runs`
splits a segment into runs of one script; `ScriptVoiceSynthesizer` sends the Latin runs (and
text of no script: spaces, digits, punctuation, symbols) to the main voice and every other run
to the espeak-ng voice of `SCRIPT_VOICES`, whose native WORD events give exact marks
(`server.speech.espeak_tts`). Chunks come out in text order, resampled to the main voice's
rate, with their marks' character offsets moved from the run to the segment, so a cut inside
a run of Chinese still falls between the graphemes whose audio played.

Han characters go to the Mandarin voice also inside Japanese: espeak-ng's Japanese voice reads
kana only and says "Chinese letter" (in English) for each kanji (measured with espeak-ng 1.52,
`espeak_TextToPhonemes("東京に行きます")`), so kanji get their Mandarin reading, which is
speech of the character where the alternative is not.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterator
from dataclasses import dataclass

from server.speech.espeak_engine import espeak_engine
from server.speech.espeak_tts import EspeakSynthesizer
from server.speech.language_voices import latin_voice
from server.speech.resampling import resample
from server.speech.synthesizer import SpeechChunk, SpeechSynthesizer, StopSignal

SCRIPT_VOICES: tuple[tuple[int, int, str], ...] = (
    (0x0370, 0x03FF, "el"),     # Greek
    (0x0400, 0x052F, "ru"),     # Cyrillic (+ supplement)
    (0x0530, 0x058F, "hy"),     # Armenian
    (0x0590, 0x05FF, "he"),     # Hebrew
    (0x0600, 0x06FF, "ar"),     # Arabic
    (0x0900, 0x097F, "hi"),     # Devanagari
    (0x0980, 0x09FF, "bn"),     # Bengali
    (0x0B80, 0x0BFF, "ta"),     # Tamil
    (0x0E00, 0x0E7F, "th"),     # Thai
    (0x10A0, 0x10FF, "ka"),     # Georgian
    (0x1100, 0x11FF, "ko"),     # Hangul Jamo
    (0x1F00, 0x1FFF, "el"),     # Greek Extended
    (0x3005, 0x3005, "cmn"),    # ideographic iteration mark
    (0x3007, 0x3007, "cmn"),    # ideographic number zero
    (0x3040, 0x30FF, "ja"),     # Hiragana, Katakana
    (0x3130, 0x318F, "ko"),     # Hangul Compatibility Jamo
    (0x31F0, 0x31FF, "ja"),     # Katakana Phonetic Extensions
    (0x3400, 0x4DBF, "cmn"),    # CJK Unified Ideographs Extension A
    (0x4E00, 0x9FFF, "cmn"),    # CJK Unified Ideographs
    (0xA960, 0xA97F, "ko"),     # Hangul Jamo Extended-A
    (0xAC00, 0xD7AF, "ko"),     # Hangul Syllables
    (0xF900, 0xFAFF, "cmn"),    # CJK Compatibility Ideographs
    (0xFF66, 0xFF9F, "ja"),     # Halfwidth Katakana
    (0x20000, 0x3134F, "cmn"),  # CJK Unified Ideographs Extensions B-G
)
"""(first code point, last code point, espeak-ng voice) of the scripts the main voice cannot
read, sorted, from the Unicode blocks (Unicode 15 `Blocks.txt`). Every voice ships with the
espeak-ng data `piper-tts` bundles (checked with `espeak_SetVoiceByName`). Letters of other
scripts (Latin, and any block not listed) and characters of no script (spaces, digits,
punctuation, symbols, combining marks) are the main voice's."""

_STARTS = [first for first, _, _ in SCRIPT_VOICES]


def voice_of(char: str) -> str | None:
    """The espeak-ng voice for `char` (one code point), or None for the main voice."""
    code = ord(char)
    index = bisect.bisect_right(_STARTS, code) - 1
    if index >= 0 and code <= SCRIPT_VOICES[index][1]:
        return SCRIPT_VOICES[index][2]
    return None


@dataclass(frozen=True, slots=True)
class ScriptRun:
    """Characters `start` .. `end - 1` (code points) of a text, spoken by `voice` (an espeak-ng
    voice name; None: the main voice)."""

    start: int
    end: int
    voice: str | None


def script_runs(text: str) -> list[ScriptRun]:
    """Split `text` into maximal runs spoken by one voice, covering it without gaps.

    A letter of a listed script starts or continues a run of its voice, a Latin letter (any
    letter of no listed script) one of the main voice; characters that are not letters
    (spaces, digits, punctuation, symbols, combining marks) stay with the run before them, or
    with the first run when they open the text ("“你好”, he said." is one Mandarin run up to
    the space after the closing quote). Empty for empty text; one main-voice run for text
    without letters.
    """
    runs: list[ScriptRun] = []
    current: str | None = None
    start = 0
    decided = False
    for index, char in enumerate(text):
        if not char.isalpha():
            continue
        voice = voice_of(char)
        if not decided:
            current, decided = voice, True
        elif voice != current:
            runs.append(ScriptRun(start, index, current))
            current, start = voice, index
    if text:
        runs.append(ScriptRun(start, len(text), current))
    return runs


class ScriptVoiceSynthesizer:
    """`SpeechSynthesizer` that speaks the runs of other scripts with espeak-ng voices, and a
    Latin-script run in French, German, Spanish, Italian, Portuguese or Dutch with the
    espeak-ng voice of its language (`server.speech.language_voices.latin_voice`: the segment
    is a sentence or a clause of one).

    Same `name` and `sample_rate_hz` as `main`; a segment without such runs goes to `main`
    unchanged. Otherwise each run is synthesized in turn (`main` for main-voice runs, an
    `EspeakSynthesizer` per voice, created on first use), its audio resampled to `main`'s rate
    and its marks' character offsets shifted by the run's start; ms stay relative to each
    chunk. `stop` is passed to every run and checked between runs.

    Args:
        main: the voice of Latin text (Piper's English voice, espeak-ng `en-us`).
    """

    def __init__(self, main: SpeechSynthesizer) -> None:
        self.main = main
        self.name = main.name
        self.sample_rate_hz = main.sample_rate_hz
        self._voices: dict[str, EspeakSynthesizer] = {}
        self._lock = threading.Lock()

    def warm_up(self) -> None:
        """Warm up the main voice, load libespeak-ng (its voices load in milliseconds) and the
        language identifier's model."""
        self.main.warm_up()
        espeak_engine()
        latin_voice("warm up the language model")

    def synthesize(self, text: str, stop: StopSignal | None = None) -> Iterator[SpeechChunk]:
        """Yield the chunks of `text` in order, each run by its voice (see the class)."""
        runs = [run if run.voice is not None else
                ScriptRun(run.start, run.end, latin_voice(text[run.start:run.end]))
                for run in script_runs(text)]
        if all(run.voice is None for run in runs):
            yield from self.main.synthesize(text, stop)
            return
        for run in runs:
            if stop is not None and stop.is_set():
                return
            engine = self.main if run.voice is None else self._voice(run.voice)
            for chunk in engine.synthesize(text[run.start:run.end], stop):
                yield self._place(chunk, engine.sample_rate_hz, run.start)

    def _voice(self, name: str) -> EspeakSynthesizer:
        with self._lock:
            if name not in self._voices:
                self._voices[name] = EspeakSynthesizer(voice=name)
            return self._voices[name]

    def _place(self, chunk: SpeechChunk, rate_hz: int, offset: int) -> SpeechChunk:
        """`chunk` of a run starting at character `offset`, at the main voice's rate."""
        return SpeechChunk(pcm=resample(chunk.pcm, rate_hz, self.sample_rate_hz),
                           marks=tuple(mark.shifted(offset, 0) for mark in chunk.marks))
