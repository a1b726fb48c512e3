"""The sans-I/O protocol core: one duplex session as plain objects, no sockets, no sleeps.

`session.Session` takes client frames (`event_parser` makes them `protocol` events, reading
their fields with `event_fields`; `session_update` parses `session.update`) and clock readings,
dispatches them, starts responses and paces their output; it gives back server events and
`effects` (start or cancel a generation, wake the sender, detect speech, transcribe) for the
I/O layer (`server.connection`) to carry out. Its collaborators, each with one job, emit into
the same outbox (`events`):
- `responses`: the responses, their lifecycle events and epochs (`response_state` holds one
  response, its paced outbound queue and its `playback.PlaybackCursor`);
- `generation`: the prompt of a response, and the text, speech and function calls generated;
- `interruptions`: playback ACKs, barge-in, truncate, clear and cancel;
- `pauses`: replies paused by the person's speech until it is decided;
- `heard_text`: calibration views and results, `conversation.item.heard`;
- `reply_playback`: where the latest reply is playing at the client;
- `items`: item create / retrieve / delete over the `history`;
- `input_turns`: the person's input audio, server VAD turns and their commits;
- `turn_taking`: the VAD's and the transcriber's reports applied to the replies;
- `turn_ends`: `semantic_vad` verdicts and the idle timeout;
- `session_settings`: the session object of `session.created` / `session.updated`.

May import `server.speech`, `server.listening`, `server.responders` and `calibration`; never the
I/O layer (`server.app`, `server.connection`, `server.config`) nor `websockets`.
"""
