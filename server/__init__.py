"""The duplex voice demo server, in rooms by concern (the websockets layout: a sans-I/O core
under thin I/O layers).

- `server` itself is the I/O layer only: `__main__` (the `duplex-demo` command), `config`
  (flags and the shared `services`), `serving` (one server process on its event loop),
  `workers` and `session_slots` (`--workers`: several processes on one port, one session
  count), `app` (HTTP + WebSocket on one port), `realtime_socket` (websockets' connection, as
  the session needs it), `connection` (the asyncio driver of one session, coordinating its
  parts by job: `receiving`, `sending`, `generation` with `speaking`, and `turn_work` with
  `input_work`), `resumption` (resume after a dropped connection, over the sans-I/O token
  registry `resume_registry`), `metrics` (Prometheus metrics from each session's events) and
  `logs` (text or JSON log lines). Only this layer touches sockets, tasks and threads.
- `server.realtime`: the sans-I/O protocol core (events in; events and effects out).
- `server.speech`: speech output (the synthesizer interface, the engines, the segmenter).
- `server.listening`: speech input (input audio buffer, VAD and turn detection, echo detection).
- `server.responders`: what the assistant says (the prompt, the demo responder).
- `server.local_audio`: the `duplex-demo talk` client (a client of the server, not part of it).

Imports run one way: this layer -> `realtime` -> (`responders` -> `speech`, `listening` ->
`speech.resampling`) -> `calibration`; `tests/test_module_dependencies.py` enforces it.
"""
