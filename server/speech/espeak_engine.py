"""libespeak-ng through ctypes: PCM plus native WORD and PHONEME events (`EspeakEngine`), in
this process or in a fresh one (`synthesize_in_fresh_process`).

The library is libespeak-ng 1.52 shipped by `espeakng-loader`, driven in synchronous mode with a
synth callback (no audio device). Its data directory is the one bundled with `piper-tts`, so that
the words espeak-ng reports are those of the dictionary Piper's own phonemizer uses.

Phoneme events are switched on in IPA (`espeak_ng_SetPhonemeEvents(1, 1)`): each PHONEME event
carries one IPA phoneme in `id.string`, after the WORD event of the word it belongs to, so every
word comes with its phonemes (what `piper_tts` aligns Piper's phoneme words to).

Measured here: WORD events carry a 1-based `text_position` counted in code points (also for
non-ASCII and astral characters) and the event's `sample` index; a number or abbreviation is
reported as several WORD events inside the written token ("$42.50" gives six); SENTENCE events
start every sentence (also after "Dr.", as Piper's sentence split does).
"""


from __future__ import annotations

import ctypes
import importlib.util
import pickle
import subprocess
import sys
import threading
from dataclasses import astuple, dataclass, replace
from pathlib import Path
from typing import Any

import espeakng_loader
import numpy as np

# espeak-ng speak_lib.h constants.
_AUDIO_OUTPUT_SYNCHRONOUS = 2
_INITIALIZE_DONT_EXIT = 0x8000
_POS_CHARACTER = 1
_CHARS_UTF8 = 1
_EE_OK = 0
_EVENT_LIST_TERMINATED = 0
_EVENT_WORD = 1
_EVENT_SENTENCE = 2
_EVENT_END = 5
_EVENT_MSG_TERMINATED = 6
_EVENT_PHONEME = 7
_WORD_END_EVENTS = frozenset({_EVENT_WORD, _EVENT_SENTENCE, _EVENT_END, _EVENT_MSG_TERMINATED})
_INT16_SCALE = 32768.0
DEFAULT_VOICE = "en-us"
_ESPEAK_RATE = 1
DEFAULT_RATE_WPM = 175
"""espeak-ng's default speaking rate (words per minute; `espeakRATE` in speak_lib.h)."""
RAND_SEED = 0
"""Seed of espeak-ng's random generator before each call of a deterministic `EspeakSynthesizer`."""


class _EventId(ctypes.Union):
    _fields_ = (("number", ctypes.c_int), ("name", ctypes.c_char_p), ("string", ctypes.c_char * 8))


class _Event(ctypes.Structure):
    """`espeak_EVENT` from speak_lib.h."""

    _fields_ = (
        ("type", ctypes.c_int),
        ("unique_identifier", ctypes.c_uint),
        ("text_position", ctypes.c_int),
        ("length", ctypes.c_int),
        ("audio_position", ctypes.c_int),
        ("sample", ctypes.c_int),
        ("user_data", ctypes.c_void_p),
        ("id", _EventId),
    )


_SynthCallback = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.POINTER(_Event)
)


@dataclass(frozen=True, slots=True)
class EspeakWord:
    """One WORD event of a synthesis.

    Attributes:
        char_start: 0-based code-point offset of the word in the synthesized text.
        sentence: 0-based index of the sentence (SENTENCE events) the word belongs to.
        start_sample: first sample of the word (22050 Hz timeline of the synthesis).
        end_sample: the next word, sentence or clause boundary (exclusive).
        phonemes: the IPA phonemes espeak-ng said for the word (NFC, with stress marks; "" for
            a word it does not speak, such as the "-" inside "2024-3094").
    """

    char_start: int
    sentence: int
    start_sample: int
    end_sample: int
    phonemes: str = ""


@dataclass(frozen=True, slots=True)
class EspeakOutput:
    """PCM (float32 mono in [-1, 1]) and the WORD events of one synthesis."""

    pcm: np.ndarray
    words: tuple[EspeakWord, ...]


class EspeakEngine:
    """The process-wide libespeak-ng instance (the library keeps global state: one per process).

    Use `espeak_engine()`; `synthesize` is serialized by an internal lock.
    """

    def __init__(self) -> None:
        """Load and initialize libespeak-ng.

        Raises:
            RuntimeError: when the library cannot be initialized.
        """
        self._lock = threading.Lock()
        self._lib = ctypes.CDLL(espeakng_loader.get_library_path())
        self._lib.espeak_Initialize.restype = ctypes.c_int
        self._lib.espeak_Initialize.argtypes = (
            ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int
        )
        self._lib.espeak_SetVoiceByName.argtypes = (ctypes.c_char_p,)
        self._lib.espeak_ng_SetPhonemeEvents.argtypes = (ctypes.c_int, ctypes.c_int)
        self._lib.espeak_ng_SetRandSeed.argtypes = (ctypes.c_long,)
        self._lib.espeak_SetParameter.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int)
        self._lib.espeak_Synth.argtypes = (
            ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_int, ctypes.c_uint,
            ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p,
        )
        rate = self._lib.espeak_Initialize(
            _AUDIO_OUTPUT_SYNCHRONOUS, 0, str(_data_dir()).encode(), _INITIALIZE_DONT_EXIT
        )
        if rate <= 0 or self._lib.espeak_ng_SetPhonemeEvents(1, 1) != _EE_OK:
            raise RuntimeError("libespeak-ng failed to initialize")
        self.sample_rate_hz: int = rate
        self._pcm: list[np.ndarray] = []
        self._events: list[tuple[int, int, int, str]] = []
        self._callback = _SynthCallback(self._on_synth)
        self._lib.espeak_SetSynthCallback(self._callback)

    def synthesize(self, text: str, voice: str = DEFAULT_VOICE,
                   rand_seed: int | None = None, rate_wpm: int | None = None) -> EspeakOutput:
        """Synthesize `text` with the espeak-ng voice `voice` (e.g. "en-us").

        Returns PCM at `sample_rate_hz` (22050) and the WORD events. Empty text gives no audio.
        `rand_seed`: seed espeak-ng's random generator first (`espeak_ng_SetRandSeed`), so
        that the noise of voices that breathe (the "+f3" variants) is the same in every
        process; None leaves it running (libespeak-ng seeds it once, differently in every
        process: measured, "en-us+f3" gave other samples in each of two processes).
        `rate_wpm`: speak at this many words per minute (`espeakRATE`, 80-450) for this call
        only; None: espeak-ng's default, `DEFAULT_RATE_WPM`. Other
        global state no call resets still carries from call to call: the same text said
        again gives a length a few samples different (measured: 4 calls, 4 lengths within
        17 samples), so output depends on what the library spoke before in the process.

        Raises:
            ValueError: when the voice is unknown.
            RuntimeError: when synthesis fails.
        """
        with self._lock:
            if self._lib.espeak_SetVoiceByName(voice.encode()) != _EE_OK:
                raise ValueError(f"unknown espeak-ng voice {voice!r}")
            if rand_seed is not None:
                self._lib.espeak_ng_SetRandSeed(rand_seed)
            if self._lib.espeak_SetParameter(
                    _ESPEAK_RATE, DEFAULT_RATE_WPM if rate_wpm is None else rate_wpm,
                    0) != _EE_OK:
                raise ValueError(f"espeak-ng refused the rate {rate_wpm} words/min")
            self._pcm = []
            self._events = []
            data = text.encode()
            if data.strip():
                status = self._lib.espeak_Synth(
                    data, len(data) + 1, 0, _POS_CHARACTER, 0, _CHARS_UTF8, None, None
                )
                if status != _EE_OK:
                    raise RuntimeError(f"espeak_Synth failed with status {status}")
            pcm = np.concatenate(self._pcm) if self._pcm else np.zeros(0, dtype=np.float32)
            return EspeakOutput(pcm=pcm, words=tuple(_words(self._events, len(pcm))))

    def _on_synth(self, wav: Any, count: int, events: Any) -> int:
        """libespeak-ng callback (ctypes pointers to int16 samples and to an event list ending in
        LIST_TERMINATED): collect samples and (type, text_position, sample, phoneme) events
        (phoneme: the IPA of a PHONEME event, else "")."""
        if count > 0 and wav:
            samples = np.ctypeslib.as_array(wav, shape=(count,))
            self._pcm.append(samples.astype(np.float32) / _INT16_SCALE)
        index = 0
        while events[index].type != _EVENT_LIST_TERMINATED:
            event = events[index]
            phoneme = ""
            if event.type == _EVENT_PHONEME:
                phoneme = bytes(event.id.string).split(b"\0")[0].decode("utf-8", "replace")
            self._events.append((event.type, event.text_position, event.sample, phoneme))
            index += 1
        return 0


def _words(events: list[tuple[int, int, int, str]], total_samples: int) -> list[EspeakWord]:
    """Turn raw (type, 1-based text position, sample, phoneme) events into words with end
    samples and phonemes (those of the PHONEME events up to the next WORD or SENTENCE event)."""
    boundary_after: list[int] = []
    boundary = total_samples
    for kind, _, sample, _ in reversed(events):
        boundary_after.append(boundary)
        if kind in _WORD_END_EVENTS:
            boundary = sample
    boundary_after.reverse()
    sentence = -1
    words: list[EspeakWord] = []
    phonemes: list[str] = []

    def close_word() -> None:
        if words and phonemes:
            words[-1] = replace(words[-1], phonemes="".join(phonemes))
        phonemes.clear()

    for (kind, position, sample, phoneme), end in zip(events, boundary_after, strict=True):
        if kind == _EVENT_PHONEME:
            phonemes.append(phoneme)
        elif kind == _EVENT_SENTENCE:
            close_word()
            sentence += 1
        elif kind == _EVENT_WORD:
            close_word()
            words.append(EspeakWord(
                char_start=max(position - 1, 0),
                sentence=max(sentence, 0),
                start_sample=sample,
                end_sample=max(end, sample),
            ))
    close_word()
    return words


def _data_dir() -> Path:
    """The espeak-ng data directory bundled with piper-tts (located without importing piper)."""
    spec = importlib.util.find_spec("piper")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("piper-tts is not installed; its espeak-ng data is required")
    return Path(next(iter(spec.submodule_search_locations))) / "espeak-ng-data"


_ENGINE: EspeakEngine | None = None
_ENGINE_LOCK = threading.Lock()


def espeak_engine() -> EspeakEngine:
    """Return the process-wide `EspeakEngine`, creating it on first use."""
    global _ENGINE
    with _ENGINE_LOCK:
        if _ENGINE is None:
            _ENGINE = EspeakEngine()
        return _ENGINE


FRESH_PROCESS_TIMEOUT_S = 60.0
"""Longest wait (s) for one synthesis in a fresh process (a 27-word sentence takes ~0.15 s
there, most of it the interpreter and numpy starting)."""


def synthesize_in_fresh_process(text: str, voice: str = DEFAULT_VOICE,
                                rand_seed: int = RAND_SEED,
                                rate_wpm: int | None = None) -> EspeakOutput:
    """`EspeakEngine.synthesize` in a new Python process whose libespeak-ng has spoken nothing
    before: the output depends on `text`, `voice`, `rand_seed` and `rate_wpm` (as for
    `EspeakEngine.synthesize`) only. In-process calls carry
    the library's hidden state from call to call (its glottal phase, pitch flutter and echo
    buffers are static variables that neither `espeak_Terminate` nor a new `espeak_Initialize`
    resets; measured: "Okay." in en-029 gave 9,474 samples fresh, 9,467 said again, 9,473
    after two other voices and 9,471 after a re-initialization, and test recordings shifted
    with the tests that ran before them). Costs a process start per call (~0.15 s).

    Raises:
        ValueError: when the voice is unknown.
        RuntimeError: when synthesis fails in the process or the process does.
    """
    done = subprocess.run([sys.executable, "-m", __name__], input=pickle.dumps(
        (text, voice, rand_seed, rate_wpm)), capture_output=True, timeout=FRESH_PROCESS_TIMEOUT_S,
        check=False)
    if done.returncode != 0:
        raise RuntimeError(f"espeak-ng in a fresh process failed: {done.stderr.decode()[-500:]}")
    kind, pcm, words = pickle.loads(done.stdout)
    if kind != "ok":
        raise (ValueError if kind == "ValueError" else RuntimeError)(words)
    return EspeakOutput(pcm=np.frombuffer(pcm, dtype=np.float32).copy(),
                        words=tuple(EspeakWord(*word) for word in words))


def _serve_one_synthesis() -> None:
    """The fresh process of `synthesize_in_fresh_process`: (text, voice, seed, rate) pickled on
    stdin; ("ok", float32 PCM bytes, the words' fields) or (the error's class name, b"", its
    message) pickled on stdout (plain values: this module runs as `__main__` here)."""
    text, voice, rand_seed, rate_wpm = pickle.loads(sys.stdin.buffer.read())
    try:
        output = EspeakEngine().synthesize(text, voice, rand_seed, rate_wpm)
    except (ValueError, RuntimeError) as error:
        result: tuple[str, bytes, Any] = (type(error).__name__, b"", str(error))
    else:
        result = ("ok", output.pcm.astype(np.float32).tobytes(),
                  [astuple(word) for word in output.words])
    sys.stdout.buffer.write(pickle.dumps(result))


if __name__ == "__main__":
    _serve_one_synthesis()
