"""How likely whisper itself finds a murmur reading of a short utterance, beside its own words.

A small whisper model writes a closed-mouth hum as words now and then: tiny.en read espeak-ng's
"mhm" as "In a game." and "M.A. Kim.", its "mm-hmm" as "And then boom.", Piper's "mm" as
"Amen." (issue 24). Its greedy transcript alone cannot tell such a guess from a word said;
the decoder can: forced to read the same audio as a hum ("Mm-hmm."), it gives that reading a
probability near (or above) that of its own words when the sound is a hum, and a far lower one
when the sound is the words (measured on `benchmarks/bench_backchannel.py`'s recordings,
tiny.en, the person's 15 s window: mean token log probability of the likeliest hum reading
-0.9 to -2.0 on hums, -2.2 to -3.9 on words such as "wait", "hang on", "thanks", "perfect").
`server.listening.backchannel` weighs that against the sound.

Scoring uses CTranslate2's `Whisper.align`, which returns the decoder's probability of every
token of a given text under teacher forcing (faster-whisper's word probabilities come from the
same call), on the encoder output the transcription already computed: a few decoder steps per
reading, no second encoding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ctranslate2 import StorageView
    from faster_whisper import WhisperModel
    from faster_whisper.tokenizer import Tokenizer

MURMUR_READINGS = (" Mm-hmm.",)
"""Hum spellings scored (English, with whisper's leading space). One, to keep the cost low:
each reading is one decoder pass, and with this one the scoring adds 5-18 % to a short
utterance's transcription (loaded 2-core machine). On `benchmarks/bench_backchannel.py`'s
recordings "Mm-hmm." was the likeliest of "Mm-hmm.", "Mm.", "Hmm.", "Mhm." and "Uh-huh." for
every two-syllable hum, the only kind `server.listening.backchannel` takes on a reading
(rule 4a)."""

MAX_SCORED_S = 2.0
"""Audio longer than this (s) is not scored: a backchannel is shorter
(`server.listening.backchannel`'s `max_ms`, 1500 ms of speech, plus margins)."""

MIN_PROBABILITY = 1e-9
"""Floor of a token probability before its logarithm (a probability of 0 would be -inf)."""


@dataclass(frozen=True, slots=True)
class MurmurReading:
    """The decoder's mean token log probability (natural log, <= 0) of its own transcript and
    of the likeliest hum reading of the same audio.

    Attributes:
        text_logprob: of the transcript's tokens (0.0 for an empty transcript).
        murmur_logprob: of the likeliest of `MURMUR_READINGS`.
        murmur: that reading, stripped ("Mm-hmm.").
        alternatives: (reading stripped, mean token log probability) of every other reading
            the caller asked for (`murmur_reading`'s `alternatives`), in its order; empty
            when none was asked.
    """

    text_logprob: float
    murmur_logprob: float
    murmur: str
    alternatives: tuple[tuple[str, float], ...] = ()


def _mean_logprob(model: WhisperModel, encoded: StorageView, prompt: list[int],
                  tokens: list[int], frames: int) -> float:
    """Mean natural-log probability of `tokens` after `prompt` on `encoded`."""
    result = model.model.align(encoded, prompt, [tokens], frames)[0]
    probabilities = np.maximum(np.asarray(result.text_token_probs, dtype=np.float64),
                               MIN_PROBABILITY)
    return float(np.mean(np.log(probabilities)))


def murmur_reading(model: WhisperModel, encoded: StorageView, tokenizer: Tokenizer,
                   prompt: list[int], text: str, audio_samples: int,
                   alternatives: Sequence[str] = ()) -> MurmurReading | None:
    """Score the transcript `tokens`, every hum reading and the `alternatives` of one
    utterance.

    Args:
        model: the faster-whisper model that decoded it.
        encoded: its encoder output (batch 1, from `model.encode`).
        tokenizer: the decoding's tokenizer (English, transcribe).
        prompt: the decoding's start tokens (start of transcript, language, task, no
            timestamps).
        text: its transcript (the decoded text, stripped; "" when none).
        audio_samples: length of the audio at 16 kHz (samples).
        alternatives: other readings to score (with whisper's leading space, " Cool."): one
            decoder pass each, 5-10 ms for tiny.en on a loaded 2-core machine.

    Returns:
        The scores, or None for audio longer than `MAX_SCORED_S`.
    """
    if audio_samples > MAX_SCORED_S * 16_000:
        return None
    frames = max(1, audio_samples // model.feature_extractor.hop_length)
    tokens = tokenizer.encode(f" {text}") if text else []
    own = _mean_logprob(model, encoded, prompt, tokens, frames) if tokens else 0.0
    scored = [(_mean_logprob(model, encoded, prompt, tokenizer.encode(reading), frames),
               reading.strip()) for reading in MURMUR_READINGS]
    best, murmur = max(scored)
    others = tuple((reading.strip(), _mean_logprob(model, encoded, prompt,
                                                   tokenizer.encode(reading), frames))
                   for reading in alternatives)
    return MurmurReading(own, best, murmur, others)
