"""A protocol fuzzer for `/v1/realtime`: batches of client frames (hypothesis strategies: valid
ones in `tests/fuzz_frames.py`, invalid ones in `tests/fuzz_defects.py`), and the loop that
sends a batch to a real server and checks how it answered.

Shared by `tests/test_protocol_fuzz.py` (a deterministic slice in CI) and
`benchmarks/fuzz_protocol.py` (a randomized run of >= 100,000 frames).

A frame is either *valid* (well formed; it may still be refused for the session's state, e.g.
an unknown item id) or *invalid* by construction: a valid event with one certain defect (a field
of the wrong type or value, a required field missing, an unknown field, a value no event accepts
anywhere such as a lone surrogate, NaN, 1e400, 2**53, a 5000-digit integer or nesting deeper
than `MAX_NESTING`, an unknown or missing `type`), or a frame that is no event at all (binary,
malformed JSON, a JSON value that is not an object, nesting of every size class from 1 to a
whole frame, a field name of every size class, an oversized frame); ids come at every size
class too, those past `MAX_ID_CHARS` as defects. Each invalid frame must
be answered by exactly one `error` event; a valid one by at most one, with a state error code.
Ids in frames are often references to the session's own recent items and responses
(`KNOWN_ID`), resolved just before sending, so that ACKs, truncates, barge-ins and deletes meet
real replies.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field

from hypothesis import strategies as st
from websockets.exceptions import ConnectionClosed

from tests.fuzz_defects import defective_frames, non_events
from tests.fuzz_frames import CHECK_PROMPT, EVENT_ID_SLOT, KNOWN_ID, FuzzFrame, valid_frames
from tests.realtime_client import RealtimeClient

STATE_ERRORS = {
    "conversation_already_has_active_response", "duplicate_item_id", "history_limit_exceeded",
    "item_not_found", "item_response_mismatch", "input_audio_buffer_commit_empty",
    "input_audio_buffer_full", "response_cancel_not_active", "response_not_found",
}
"""Error codes a valid frame may get: what it names does not exist, or cannot be done now."""

STATE_INVALID_VALUES = {"audio_end_ms"}
"""Params of the `invalid_value` errors a valid frame may get (a truncate beyond the audio)."""

CHECK_REPLY = "hello there"
"""What the reply to `CHECK_PROMPT` reads back (the demo responder speaks `say:` text)."""


def _prompt_frames(text: str = CHECK_PROMPT) -> list[FuzzFrame]:
    item = {"type": "conversation.item.create", "event_id": EVENT_ID_SLOT, "item": {
        "type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}}
    create = {"type": "response.create", "event_id": EVENT_ID_SLOT}
    return [FuzzFrame(json.dumps(item), False, True, "valid prompt"),
            FuzzFrame(json.dumps(create), False, True, "valid response.create")]


client_frames = st.one_of(valid_frames(), defective_frames(), non_events())
"""Any single client frame: valid, defective or no event at all."""


def frame_batches(min_frames: int = 1, max_frames: int = 15) -> st.SearchStrategy[
        list[FuzzFrame]]:
    """A list of `min_frames` to `max_frames` frames and valid prompts (a user item
    "say: hello there" then `response.create`, two frames), interleaved."""
    steps = st.one_of(client_frames.map(lambda frame: [frame]), st.just(_prompt_frames()))
    return st.lists(steps, min_size=min_frames, max_size=max_frames).map(
        lambda groups: [frame for group in groups for frame in group])


# ---------------------------------------------------------------------------------- the driver


@dataclass(slots=True)
class BatchOutcome:
    """How the server answered one batch.

    Attributes:
        unanswered: kinds of invalid frames not answered by an `error` event.
        refused_valid: "kind: code param" of valid frames refused for their form.
        duplicated: kinds of frames answered by more than one `error` event.
        server_errors: messages of `server_error` events (a failure on the server's side).
        closed: "code reason" when the server closed the connection, else None.
        prompt_failure: what went wrong with the valid prompt after the batch, else None.
    """

    unanswered: list[str] = field(default_factory=list)
    refused_valid: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    server_errors: list[str] = field(default_factory=list)
    closed: str | None = None
    prompt_failure: str | None = None

    @property
    def clean(self) -> bool:
        """True when every check held."""
        return not (self.unanswered or self.refused_valid or self.duplicated
                    or self.server_errors or self.closed or self.prompt_failure)


async def run_batch(client: RealtimeClient, frames: list[FuzzFrame], label: str,
                    timeout: float = 30.0) -> BatchOutcome:
    """Send `frames` (named ones get the ids `{label}.{index}`), then check the answers and that
    a valid prompt still gets a whole reply.

    The server applies frames in order, so once the `error` of a probe frame (an unknown
    `type`) arrives every frame sent before it has been answered. A probe comes last, and
    before each frame that names a `KNOWN_ID`, which is then resolved. Errors are matched to
    named frames by `event_id`; the errors without one must be exactly as many as the invalid
    frames without a readable id.

    Raises:
        TimeoutError: the probe's error or the prompt's reply did not come within `timeout` s.
    """
    outcome = BatchOutcome()
    start = len(client.events)
    named: dict[str, FuzzFrame] = {}
    probes: set[str] = set()

    async def settle() -> None:
        """Wait until the server answered every frame sent so far."""
        probe = f"{label}.probe{len(probes)}"
        probes.add(probe)
        await client.send({"type": "fuzz.probe", "event_id": probe})
        await client.wait_for("error", lambda e: e["error"]["event_id"] == probe, timeout)

    try:
        for index, frame in enumerate(frames):
            payload = frame.payload
            if frame.named and isinstance(payload, str):
                event_id = f"{label}.{index}"
                named[event_id] = frame
                payload = payload.replace(json.dumps(EVENT_ID_SLOT), json.dumps(event_id), 1)
            if isinstance(payload, str) and KNOWN_ID.search(payload):
                await settle()
                payload = _resolve_known_ids(client, payload)
            await client.send_raw(payload)
        await settle()
        errors = Counter[str | None]()
        codes: dict[str, str] = {}
        for event in client.events[start:]:
            if event["type"] == "error" and event["error"]["event_id"] not in probes:
                error = event["error"]
                if error["type"] == "server_error":
                    outcome.server_errors.append(f"{error['code']}: {error['message']}")
                    continue
                errors[error["event_id"]] += 1
                codes[error["event_id"]] = f"{error['code']} {error['param']}"
        for event_id, frame in named.items():
            if errors[event_id] > 1:
                outcome.duplicated.append(frame.kind)
            if frame.invalid and not errors[event_id]:
                outcome.unanswered.append(frame.kind)
            if not frame.invalid and errors[event_id]:
                code, param = codes[event_id].split(" ", 1)
                if code not in STATE_ERRORS and not (
                        code == "invalid_value" and param in STATE_INVALID_VALUES):
                    outcome.refused_valid.append(f"{frame.kind}: {codes[event_id]}")
        anonymous = [f.kind for f in frames if f.invalid and not f.named]
        if errors[None] < len(anonymous):
            outcome.unanswered.append(f"{len(anonymous) - errors[None]} of {anonymous}")
        elif errors[None] > len(anonymous):
            outcome.duplicated.append(f"{errors[None] - len(anonymous)} anonymous errors")
        outcome.prompt_failure = await check_prompt(client, label, timeout)
    except ConnectionClosed as closed:
        outcome.closed = f"{closed.rcvd.code if closed.rcvd else 1006} " + (
            closed.rcvd.reason if closed.rcvd else "no close frame")
    return outcome


def _resolve_known_ids(client: RealtimeClient, payload: str) -> str:
    """Replace each `KNOWN_ID` reference in `payload` by the id it names (an unknown id when
    the session has fewer items or responses)."""
    known = {"item": [e["item"]["id"] for e in client.of_type("conversation.item.added")],
             "resp": [e["response"]["id"] for e in client.of_type("response.created")]}

    def real_id(match: re.Match[str]) -> str:
        kind, back = match.group(1), int(match.group(2))
        announced = known[kind]
        return json.dumps(announced[-1 - back] if back < len(announced) else f"{kind}_unknown")

    return KNOWN_ID.sub(real_id, payload)


async def check_prompt(client: RealtimeClient, label: str, timeout: float = 30.0) -> str | None:
    """Turn server VAD off and audio output on (a batch may have asked for text only), cancel
    any reply, then send `CHECK_PROMPT` and `response.create`;
    return None when the new reply completes, its audio and transcript reading back
    `CHECK_REPLY`, else what went wrong.

    Raises:
        TimeoutError: the reply did not complete within `timeout` s.
        ConnectionClosed: the server closed the connection.
    """
    await client.send({"type": "session.update", "event_id": f"{label}.vad-off",
                       "session": {"audio": {"input": {"turn_detection": None}},
                                   "output_modalities": ["audio"]}})
    await client.send({"type": "response.cancel", "event_id": f"{label}.cancel"})
    await client.send({"type": "fuzz.probe", "event_id": f"{label}.settled"})
    await client.wait_for("error", lambda e: e["error"]["event_id"] == f"{label}.settled",
                          timeout)
    known = {e["response"]["id"] for e in client.of_type("response.created")}
    for frame in _prompt_frames():
        assert isinstance(frame.payload, str)
        await client.send(json.loads(frame.payload) | {"event_id": f"{label}.{frame.kind}"})
    created = await client.wait_for("response.created",
                                    lambda e: e["response"]["id"] not in known, timeout)
    response_id = created["response"]["id"]
    done = await client.wait_for("response.done", lambda e: e["response"]["id"] == response_id,
                                 timeout)
    spoken = client.of_type("response.output_audio_transcript.done", response_id=response_id)
    transcript = spoken[0]["transcript"] if spoken else None
    if done["response"]["status"] != "completed" or transcript != CHECK_REPLY or not (
            client.audio_bytes(response_id)):
        return f"reply {done['response']['status']} with transcript {transcript!r}"
    return None
