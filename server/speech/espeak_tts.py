"""espeak-ng as a TTS engine (`EspeakSynthesizer`): its audio with exact marks from its own WORD
events (`server.speech.espeak_engine`)."""

from __future__ import annotations

from collections.abc import Iterator

from calibration.speakable import make_speakable
from server.speech.espeak_engine import (
    DEFAULT_VOICE,
    RAND_SEED,
    espeak_engine,
    synthesize_in_fresh_process,
)
from server.speech.synthesizer import SpeechChunk, StopSignal, WordLocator


class EspeakSynthesizer:
    """`SpeechSynthesizer` "espeak": espeak-ng audio with marks from its native WORD events.

    One chunk per `synthesize` call; marks are exact (not estimated) because the events come from
    the same synthesis run as the audio. In the server's process the output is not bit-identical
    across calls (the library's hidden state: `synthesize_in_fresh_process`; measured: the same
    text differs by about +-200 samples from call to call); `deterministic` synthesizers speak
    each text in a fresh process, so the same text always gives the same samples.
    """

    name = "espeak"

    def __init__(self, voice: str | None = None, deterministic: bool = False) -> None:
        """Create the synthesizer for espeak-ng voice `voice` (default "en-us");
        `deterministic`: each call in a fresh process with espeak-ng's random generator seeded
        (`RAND_SEED`): the output depends on the text and the voice only, as tests need it (a
        breathing voice's noise and the library's hidden state otherwise change it).

        Raises:
            ValueError: the voice is unknown to espeak-ng.
        """
        self._engine = espeak_engine()
        self._voice = voice or DEFAULT_VOICE
        self._deterministic = deterministic
        self._engine.synthesize("", self._voice)
        self.sample_rate_hz: int = self._engine.sample_rate_hz

    def warm_up(self) -> None:
        """Synthesize a short sentence so that the voice and dictionary are loaded."""
        self._engine.synthesize("Hello there.", self._voice)

    def synthesize(self, text: str, stop: StopSignal | None = None) -> Iterator[SpeechChunk]:
        """Yield one chunk for `text`, or nothing when it has nothing speakable (e.g. "👍").

        Marks: char offsets into `text`, ms from the chunk's first sample. `stop` is checked
        once, before synthesis: one call is short (measured: 15 ms for a 27-word sentence in
        this process, ~0.15 s in a fresh one).
        """
        speakable = make_speakable(text, self._voice.split("-")[0])
        if speakable.is_silent or (stop is not None and stop.is_set()):
            return
        if self._deterministic:
            output = synthesize_in_fresh_process(speakable.text, self._voice, RAND_SEED)
        else:
            output = self._engine.synthesize(speakable.text, self._voice)
        locator = WordLocator(speakable)
        units = locator.word_units([word.char_start for word in output.words])
        spans = [(word.start_sample, word.end_sample) for word in output.words]
        yield SpeechChunk(
            pcm=output.pcm, marks=locator.exact_marks(units, spans, self.sample_rate_hz)
        )
