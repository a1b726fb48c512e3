"""The playing position the session estimates for each microphone append (the position the
echo detector maps the microphone to): from the first audio sent, through ACKs and late
appends, for `ECHO_TAIL_MS` after the reply played out.
"""

from __future__ import annotations

import base64
import json

from server.listening.echo import ECHO_TAIL_MS
from server.realtime.session import Session, SessionConfig


def test_the_session_maps_appends_to_the_playing_position() -> None:
    session = Session(SessionConfig(lead_ms=400, jitter_ms=100, frame_ms=100))
    session.receive(json.dumps({"type": "session.update", "session": {"audio": {"input": {
        "turn_detection": {"type": "server_vad"}}}}}))
    session.receive(json.dumps({"type": "response.create"}))
    response_id = session.current_response_id
    assert response_id is not None
    session.generation.on_text(response_id, "Hello there.")
    session.generation.on_speech(response_id, 12, b"\x00\x00" * 24 * 3000, [])
    session.generation.on_done(response_id)
    session.take_effects()

    heard = [0.0]  # ms of microphone audio appended

    def append_at(clock_ms: float, late_ms: float = 0.0) -> tuple[str | None, int | None]:
        """Append the microphone up to `clock_ms` less `late_ms` (a continuous stream)."""
        session.set_clock(clock_ms)
        samples = max(round((clock_ms - late_ms - heard[0]) * 24), 2)
        heard[0] += samples / 24
        session.receive(json.dumps({"type": "input_audio_buffer.append", "audio": (
            base64.b64encode(b"\x00\x00" * samples).decode())}))
        effect = session.take_effects()[-1]
        return effect.response_id, effect.playback_ms  # type: ignore[union-attr]

    assert append_at(0.0) == (None, None)  # nothing sent yet
    session.pull_outbound(1000.0)
    assert append_at(1050.0) == (response_id, 0)  # the jitter buffer is filling
    assert append_at(1300.0) == (response_id, 200)
    session.set_clock(1400.0)
    session.receive(json.dumps({"type": "playback.ack", "response_id": response_id,
                                "played_ms": 250}))
    assert append_at(1460.0) == (response_id, 310)
    # Audio that arrives 150 ms later than the stream so far: what played when it was captured.
    assert append_at(1700.0, late_ms=150.0) == (response_id, 400)
    assert append_at(5000.0) == (response_id, 500)  # at most what was sent
    session.pull_outbound(5000.0)
    session.set_clock(6000.0)
    session.receive(json.dumps({"type": "playback.ack", "response_id": response_id,
                                "played_ms": 3000}))
    assert append_at(6000.0 + ECHO_TAIL_MS) == (response_id, 3000)  # the echo tail
    assert append_at(6001.0 + ECHO_TAIL_MS) == (None, None)
