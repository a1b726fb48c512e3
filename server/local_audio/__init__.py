"""Local-audio client: `duplex-demo talk` speaks with a server through this machine's sound
card instead of a browser.

- `playback`: the ledger of audio queued for the output device and of what of it reached the
  speaker (frames the stream callback consumed, minus the output latency), which the ACKs
  report;
- `capture`: the microphone side: a real-time gate for devices without a clock and the
  barge-in detector (the page's rules: speech held 200 ms, held back while it is the
  assistant's own echo), built from `server.listening`'s Silero VAD, turn detector and echo
  detector;
- `devices`: opening the PortAudio stream with `sounddevice`, with one-line errors when
  PortAudio or a device is missing;
- `transcript`: the conversation as printed;
- `client`: the asyncio client over `websockets` (session, prompts, audio, ACKs, barge-in,
  the printed conversation);
- `cli`: the `talk` subcommand's flags and exit codes.

A client of the server, not a part of it: may import `server.listening` and
`server.speech.resampling` (the shared signal code), never the server's I/O layer, its
protocol core or its speech engines; nothing in `server` imports it but `server.__main__`.
"""
