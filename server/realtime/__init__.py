"""The sans-I/O protocol core: one duplex session as plain objects, no sockets, no sleeps.

`session.Session` takes client frames (parsed by `protocol`), generation output, VAD reports,
transcripts and clock readings, and gives back server events and `effects` (start or cancel a
generation, wake the sender, detect speech, transcribe) for the I/O layer (`server.connection`)
to carry out. Its collaborators, each with one job, emit into the same outbox (`events`):
- `responses`: the responses, their lifecycle events and epochs (`response_state` holds one
  response, its paced outbound queue and its `playback.PlaybackCursor`);
- `interruptions`: playback ACKs, barge-in, truncate, clear and cancel;
- `heard_text`: calibration views and results, `conversation.item.heard`;
- `items`: item create / retrieve / delete over the `history`;
- `input_turns`: the person's input audio and server VAD turns.

May import `server.speech`, `server.listening`, `server.responders` and `calibration`; never the
I/O layer (`server.app`, `server.connection`, `server.config`) nor `websockets`.
"""
