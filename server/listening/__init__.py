"""Speech input: the person's microphone audio in, turn events out.

- `server_vad_settings`: OpenAI's `server_vad` settings and the audio margins of a turn;
- `input_audio`: the bounded input audio buffer on the session's input timeline;
- `vad`: streaming Silero VAD and the `TurnDetector` state machine;
- `echo`: the double-talk detector that tells the assistant's own voice from a person;
- `input_speech`: the per-session glue that runs them on appended audio.

May import `server.speech.resampling` and `calibration`; nothing else of `server`.
"""
