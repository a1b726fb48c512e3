"""Speech output: written reply text in, PCM audio with word marks out.

- `synthesizer`: the `SpeechSynthesizer` interface, `SpeechChunk` and `WordLocator`, shared by
  the engines;
- `engines`: the registry that creates an engine by name (`create_synthesizer`);
- `piper_tts`, `espeak_tts`, `uniform_tts`: the engines (Piper, espeak-ng, the deterministic
  test voice); `espeak_engine`: libespeak-ng itself (in this process, or in a fresh one for
  output that depends on the text alone), which Piper's word alignment uses too;
- `segmenter`: splits streamed reply text into the pieces synthesized one at a time;
- `speakable`: turns text written for reading into text to speak, with a map back;
- `resampling`: sample-rate conversion.

May import `calibration` only (text units, word marks); nothing else of `server`.
"""
