"""Server events onto one WebSocket: one text frame per event, several frames per socket write.

`websockets`' `send` makes one socket write (one `send` system call, one wake-up of the
client) per message and checks the connection's state and flow control per message. A session
usually has a few events ready at once (an ACK's `playback.acknowledged` and the audio delta
that ACK releases), so `send_events` frames them with the connection's Sans-I/O protocol
object (`websockets.protocol.Protocol.send_text` / `data_to_send`, the documented API that
`send` itself uses) and hands them to the transport in writes of up to `WRITE_CHUNK_BYTES`.
Flow control stays `websockets`': once the transport buffers more than its high-water mark
(the server's `write_limit`), the writer waits in the connection's `drain` as `send` would,
bounded by a timeout.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from websockets.asyncio.server import ServerConnection
from websockets.protocol import State

WRITE_CHUNK_BYTES = 16 * 1024
"""Most frame bytes joined into one transport write (a larger frame is written alone): for a
client that stopped reading, the transport holds at most its high-water mark (the server's
32 KiB `write_limit`) plus one write, as with `send`, which waits after each frame."""

EVENT_ENCODER = json.JSONEncoder(ensure_ascii=False)
"""The encoder of every server event (one instance: `json.dumps` with an option builds a new
encoder per call). UTF-8 text as is, not `\\u` escapes."""

AUDIO_DELTA = "response.output_audio.delta"
"""The event whose `delta` `encode_event` places verbatim."""


def encode_event(event: dict[str, Any]) -> bytes:
    """One server event as the UTF-8 JSON text of its frame.

    An audio delta's `delta` is base64 (RFC 4648 alphabet: nothing JSON escapes), most of the
    frame (6.4 KB for 100 ms at 24 kHz) and costly to scan for escapes, so it is placed
    verbatim as the object's last member; every other field goes through `EVENT_ENCODER`.

    Raises:
        UnicodeEncodeError: a string holds a lone surrogate.
    """
    if event.get("type") != AUDIO_DELTA:
        return EVENT_ENCODER.encode(event).encode()
    head = EVENT_ENCODER.encode({key: value for key, value in event.items() if key != "delta"})
    return f'{head[:-1]}, "delta": "{event["delta"]}"}}'.encode()


async def send_events(websocket: ServerConnection, events: list[dict[str, Any]],
                      timeout_s: float) -> bool:
    """Send `events` in order, one text frame each, coalescing frames into few socket writes.

    Args:
        websocket: an accepted server connection.
        events: server events (JSON-serializable dicts).
        timeout_s: longest wait (s) for the client to take data once the outgoing buffers are
            full.

    Returns:
        False when the client took no data for `timeout_s` (it stopped reading; the events not
        yet written are dropped); True otherwise, also when the connection is no longer open
        (then the remaining events are dropped, as `websocket.send` would drop them by raising
        `ConnectionClosed`).

    Raises:
        UnicodeEncodeError: an event holds a lone surrogate (nothing of the batch was sent).
    """
    frames = [encode_event(event) for event in events]
    protocol, transport = websocket.protocol, websocket.transport
    high_water = transport.get_write_buffer_limits()[1]
    index = 0
    while index < len(frames):
        if protocol.state is not State.OPEN:
            return True
        size = 0
        while index < len(frames) and (size == 0 or size + len(frames[index])
                                       <= WRITE_CHUNK_BYTES):
            protocol.send_text(frames[index])
            size += len(frames[index])
            index += 1
        transport.write(b"".join(protocol.data_to_send()))
        if transport.get_write_buffer_size() > high_water:
            waiting = asyncio.timeout(timeout_s)
            try:
                async with waiting:
                    await websocket.drain()
            except OSError:  # the timeout (TimeoutError), or the connection was lost
                return not waiting.expired()
    return True
