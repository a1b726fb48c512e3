"""Decoding a short utterance in a shorter whisper window than 30 s.

faster-whisper pads every segment's log-mel features to whisper's 30 s window before the
encoder, and the encoder's cost is nearly all of a short utterance's transcription. The person's
turns (`calibration.local_asr.person_transcriber`) are padded to `PERSON_WINDOW_S` instead and
decoded once, greedily (`decode_window`); a decode this window cannot vouch for (no speech, a
loop, audio too long for the window) is left to the 30 s path, which the caller takes then.

Blocking, CPU-bound: call from a worker thread.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from calibration.asr_readings import MurmurReading, murmur_reading

if TYPE_CHECKING:
    from faster_whisper import WhisperModel

WHISPER_RATE_HZ = 16_000
"""Input rate of whisper models."""

WHISPER_WINDOW_S = 30
"""Whisper's input window (s): faster-whisper pads every segment's log-mel features to 30 s
(3000 frames) before the encoder."""

PERSON_WINDOW_S = 15
"""Encoder window (s) for the person's turns (`calibration.local_asr.person_transcriber`): their
audio, padded to 15 s instead of 30, when it leaves `WINDOW_PADDING_S` of it. The encoder's cost
is nearly all of a short utterance's transcription, and CTranslate2 encodes a shorter input.
Measured (`python -m benchmarks.bench_asr_window`, tiny.en int8, 2 threads, quiet 2-core
machine): on the 24 `tests/test_vad.py` sentences by Piper and four espeak-ng voices (120
utterances, 300 ms of silence each side), word error rate 18.38 % at 30 s, 16.62 % at 15 s,
15.41 % at 20 s, 14.19 % at 10 s, wall time p50 415 / 149 / 248 / 107 ms; on
`benchmarks/bench_backchannel.py`'s 50 murmurs and words plus 75 short questions and refusals
("how come?", "mm-mm", "huh?"), the backchannel rule (`server.listening.backchannel.classify`)
took 22 / 24 / 24 / 23 of the 25 backchannels for backchannels and 1 / 0 / 0 / 1 of the 100
others. Shorter windows break down: at 7 s and 5 s tiny.en repeated words to the token limit
("Right. Right. Right. ...") and misread murmurs (18 and 14 of 25). 15 s keeps a margin from
that edge."""

WINDOW_PADDING_S = 5
"""Least padding (s) a short window keeps after the audio: longer audio takes the 30 s path.
Found by a tester: a 14.9 s question in the 15 s window was read as its first clause only
("Could you remind me tomorrow?" for 31 words, every run; whole at 14.6 s and in 30 s); turns
of 8-10 s read as well in 15 s as in 30 s (40 utterances: 8 worse, 10 better, 22 the same)."""

NO_SPEECH_THRESHOLD = 0.6
"""A window whose no-speech probability is above this, while its average token log probability
is below `LOG_PROB_THRESHOLD`, has no speech (faster-whisper's `transcribe` defaults). In a
short window that verdict is checked in the 30 s window: the short one gave it for 17 short
words a tester said over a reply ("listen", "hold on", "nope", ...) of which 30 s read 9, and an
utterance with no words is judged by its sound alone (espeak-ng's fast "listen" resumed the
reply as an "uh-huh"). A decode with no letter or digit ("." for a silent second, average log
probability -0.91 under `calibration.cpu_numerics`) in a window above this is no speech either."""

LOG_PROB_THRESHOLD = -1.0
"""See `NO_SPEECH_THRESHOLD`."""

COMPRESSION_RATIO_THRESHOLD = 2.4
"""A decode whose text compresses (zlib) better than this repeats itself: faster-whisper's
default for decoding again. In a short window tiny.en sometimes loops on a murmur (espeak-ng
en-gb-x-rp "mm-hmm" read "M. M. M. ..." to the token limit, about 1 s of CPU): such a decode
is done again in the 30 s window. Short loops compress too little for this test:
`LOOP_MIN_TOKENS` catches them."""

LOOP_MIN_TOKENS = 6
"""A decode in a short window of at least this many tokens, at most a third of them distinct
("M. M. M.", "Right. Right. Right."), is a loop and is done again in the 30 s window. A
person's "yeah, yeah, yeah" is read there too, only slower."""

WINDOW_TOKENS_PER_S = 10
"""Tokens a decode in a short window may write per second of audio (plus
`WINDOW_TOKENS_SLACK`): fast speech is 3-4 words, 5-7 tokens with punctuation, a second; the
limit bounds the time a loop costs."""

WINDOW_TOKENS_SLACK = 10
"""See `WINDOW_TOKENS_PER_S`."""


def decode_window(model: WhisperModel, audio: np.ndarray, window_s: int,
                  alternatives: Callable[[str], Sequence[str]] | None = None,
                  ) -> tuple[str | None, Callable[[str], MurmurReading | None]]:
    """One greedy English decode of `audio` (1-D float32 at 16 kHz) with its log-mel features
    padded to `window_s` seconds instead of `WHISPER_WINDOW_S` (`PERSON_WINDOW_S`), as
    faster-whisper's `transcribe` decodes one segment otherwise: no timestamps, its suppressed
    tokens. None when the audio does not leave `WINDOW_PADDING_S` of the window, when the
    window has no speech (`NO_SPEECH_THRESHOLD`), or the decode loops (`LOOP_MIN_TOKENS`,
    `COMPRESSION_RATIO_THRESHOLD`; at most `WINDOW_TOKENS_PER_S` are written): decode it in
    the 30 s window then. Also returns the scorer of a transcript of this audio against its
    hum readings on the same encoding (`calibration.asr_readings.murmur_reading`), which
    gives None for audio that does not fit the window or is longer than `MAX_SCORED_S`;
    `alternatives(text)` names further readings of the audio to score beside the transcript
    `text` (`MurmurReading.alternatives`; None: none)."""
    from faster_whisper.audio import pad_or_trim
    from faster_whisper.tokenizer import Tokenizer
    from faster_whisper.transcribe import get_compression_ratio, get_suppressed_tokens

    if audio.size > (window_s - WINDOW_PADDING_S) * WHISPER_RATE_HZ:
        return None, lambda _text: None
    features = model.feature_extractor(audio)
    frames = window_s * WHISPER_RATE_HZ // model.feature_extractor.hop_length
    tokenizer = Tokenizer(model.hf_tokenizer, model.model.is_multilingual, task="transcribe",
                          language="en")
    prompt = model.get_prompt(tokenizer, [], without_timestamps=True)
    most_tokens = WINDOW_TOKENS_SLACK + WINDOW_TOKENS_PER_S * audio.size // WHISPER_RATE_HZ
    encoded = model.encode(pad_or_trim(features, frames))

    def scored(text: str) -> MurmurReading | None:
        return murmur_reading(model, encoded, tokenizer, prompt, text, audio.size,
                              alternatives(text) if alternatives is not None else ())

    result = model.model.generate(
        encoded, [prompt], beam_size=1,
        max_length=len(prompt) + most_tokens, return_scores=True, return_no_speech_prob=True,
        suppress_blank=True, suppress_tokens=list(get_suppressed_tokens(tokenizer, [-1])))[0]
    tokens = result.sequences_ids[0]
    avg_logprob = result.scores[0] * len(tokens) / (len(tokens) + 1)
    text = tokenizer.decode(tokens).strip()
    if result.no_speech_prob > NO_SPEECH_THRESHOLD and (
            avg_logprob < LOG_PROB_THRESHOLD or not any(map(str.isalnum, text))):
        return None, scored
    if ((len(tokens) >= LOOP_MIN_TOKENS and 3 * len(set(tokens)) <= len(tokens))
            or get_compression_ratio(text) > COMPRESSION_RATIO_THRESHOLD):
        return None, scored
    return text, scored
