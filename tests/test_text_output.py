"""`output_modalities: ["text"]` gets text only (issue 25): OpenAI's text events
(`response.output_text.delta` / `.done`, a `text` content part, an `output_text` item), no
audio event and no speech synthesized, every event valid against the `openai` package's
models; for the session (`session.update`) and for one response (`response.create`), over a
real server on loopback with the Piper voice. The text sent is the reply's history text."""

from __future__ import annotations

from tests.realtime_client import RealtimeClient
from tests.test_openai_conversations import SERVER_EVENT

REPLY = "It is sunny today. Tomorrow brings rain."
AUDIO_EVENTS = {"response.output_audio.delta", "response.output_audio.done",
                "response.output_audio_transcript.delta", "response.output_audio_transcript.done"}


def ask(text: str) -> dict:
    return {"type": "conversation.item.create", "item": {
        "type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}}


async def test_a_text_session_gets_text_events_only(start_server) -> None:
    server = await start_server(tts="piper")
    async with RealtimeClient.connect(server.ws_url, extensions=None) as client:
        await client.send({"type": "session.update", "session": {
            "type": "realtime", "output_modalities": ["text"]}})
        updated = await client.wait_for("session.updated")
        assert updated["session"]["output_modalities"] == ["text"]
        await client.send(ask(f"say: {REPLY}"))
        await client.send({"type": "response.create"})
        done = await client.wait_for("response.done", timeout=30)
        response_id = done["response"]["id"]
        await client.send({"type": "response.create",
                           "response": {"output_modalities": ["audio"]}})
        spoken = await client.wait_for("response.done", timeout=30)
    assert not client.of_type("error")
    for event in client.events:
        assert SERVER_EVENT.validate_python(event, strict=True).type == event["type"]
    text_events = [e for e in client.events if e.get("response_id") == response_id]
    assert not {e["type"] for e in text_events} & AUDIO_EVENTS
    assert "".join(e["delta"] for e in client.of_type("response.output_text.delta")) == REPLY
    assert client.of_type("response.output_text.done")[0]["text"] == REPLY
    parts = [e["part"] for e in client.of_type("response.content_part.done",
                                               response_id=response_id)]
    assert parts == [{"type": "text", "text": REPLY}]
    assert done["response"]["output_modalities"] == ["text"]
    assert done["response"]["output"][0]["content"] == [{"type": "output_text", "text": REPLY}]
    assert spoken["response"]["output_modalities"] == ["audio"]
    assert client.of_type("response.output_audio.delta", response_id=spoken["response"]["id"])


async def test_one_text_response_in_an_audio_session(start_server) -> None:
    server = await start_server(tts="piper")
    async with RealtimeClient.connect(server.ws_url, extensions=None) as client:
        await client.send(ask(f"say: {REPLY}"))
        await client.send({"type": "response.create",
                           "response": {"output_modalities": ["text"]}})
        done = await client.wait_for("response.done", timeout=30)
        await client.send({"type": "conversation.item.retrieve",
                           "item_id": done["response"]["output"][0]["id"]})
        retrieved = await client.wait_for("conversation.item.retrieved")
        await client.send(ask("Where did you stop?"))
        await client.send({"type": "response.create",
                           "response": {"output_modalities": ["text"]}})
        recall = await client.wait_for("response.done", lambda e: e["response"]["id"] != (
            done["response"]["id"]), timeout=30)
    assert not client.of_type("error")
    assert not client.of_type("response.output_audio.delta")
    assert done["response"]["status"] == "completed"
    assert retrieved["item"]["content"] == [{"type": "output_text", "text": REPLY}]
    said = [(t.role, t.text, t.interrupted) for t in server.responder.prompts[-1].turns]
    assert said[:2] == [("user", f"say: {REPLY}", False), ("assistant", REPLY, False)]
    assert recall["response"]["status"] == "completed"


async def test_a_bad_output_modalities_is_refused_and_the_session_goes_on(start_server) -> None:
    """Found by `benchmarks.fuzz_protocol` (issue 26's "nothing a client sends kills a
    session"): `session.update` with `output_modalities: 1.5` ended its session with 1011 and
    a `TypeError` (the value was read before the schema's refusal was raised). Every such
    value now gets one `error` naming the field, and the session still speaks."""
    server = await start_server()
    async with RealtimeClient.connect(server.ws_url) as client:
        for bad in (1.5, "audio", {"audio": True}, [1], ["audio", None]):
            event_id = await client.send({"type": "session.update",
                                          "session": {"output_modalities": bad}})
            error = (await client.wait_for("error", timeout=10))["error"]
            assert error["event_id"] == event_id
            assert error["param"].startswith("session.output_modalities"), error
        await client.prompt("say: Still speaking.")
        done = await client.wait_for("response.done")
        assert done["response"]["status"] == "completed"
        assert client.of_type("response.output_audio.delta")
