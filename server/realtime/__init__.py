"""The sans-I/O protocol core: one duplex session as plain objects, no sockets, no sleeps.

`session.Session` takes client frames (`protocol` parses them), generation output and clock
readings, and gives back server events and `effects` (start or cancel a generation, wake the
sender, detect speech, transcribe) for the I/O layer (`server.connection`) to carry out. It keeps
the conversation (`history`), one `response_state.ResponseState` per reply with its
`playback.PlaybackCursor`, and delegates input-audio turns (`input_turns`) and item operations
(`items`) to collaborators that emit through the same `events.EventLog`.

May import `server.speech`, `server.listening`, `server.responders` and `calibration`; never the
I/O layer (`server.app`, `server.connection`, `server.config`) nor `websockets`.
"""
