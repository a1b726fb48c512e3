"""Acceptance: the `asr` policy on real Piper speech, judged by Piper's own word marks.

A multi-sentence reply with numbers is synthesised as the server does it (segmenter spans ->
deterministic Piper -> resample to 24 kHz -> concatenate; marks shifted onto the reply timeline
by the floor-ms offset of each chunk, as `server.realtime.generation.Generation.on_speech`
does). Ground truth for a cut at `played_ms`, from the marks in text order:

- fully played: the cut after every word whose `end_ms <= played_ms`;
- started: the cut after every word whose `start_ms < played_ms`;

both as `calibration.units.snap_down` boundaries (the boundaries policies return). A result
"lands" when fully played <= result <= started.

Refusals (None: history keeps the conservative empty text) do NOT count as landing: the
acceptance criterion is about where the history cut lands, and a refusal puts it at 0, which is
not between the bounds once a word was fully played. They are measured as the refusal rate.
"""

from __future__ import annotations

import asyncio
import math
from bisect import bisect_right
from typing import Any

import numpy as np
import pytest

from benchmarks.calibration_corpus import RATE_HZ, Reply, SpokenReply, heard_bounds, synthesize
from calibration import units
from calibration.history_calibration import HeardCut, HeardTextSnapshot
from calibration.local_asr import LocalWhisperTranscriber
from calibration.policies import ASR_SAFETY_MARGIN_MS, asr_policy
from calibration.word_marks import WordMark
from tests.conftest import loaded_synthesizer
from tests.realtime_client import RealtimeClient
from tests.transcription_endpoint import TranscriptionEndpoint

REPLY = (
    "The museum opened in 1998 and now has 42 rooms. Tickets cost $12.50 for adults. "
    "About 3,000 people visit every day, and the tour lasts 90 minutes."
)
CUT_STEP_MS = 500
MIN_LANDED = 0.95
MAX_REFUSED = 0.35
"""A refusal keeps history's conservative empty text, so it is allowed here up to this share.
Measured on this reply: 7 of 24 refused under Intel MKL with AVX-512, 8 of 24 under the pinned
arithmetic (`calibration.cpu_numerics`), three cuts told apart between the two (1000 and
10000 ms answered only under MKL, 2500 ms only pinned): the share moves by a cut with the CPU's
float path, and 0.30 sat on it."""
BARGE_IN_MS = 2_500
CALIBRATION_TIMEOUT_MS = 10_000
"""The end-to-end tests check correctness, not latency: a generous calibration budget keeps a
busy 2-core machine from turning a slow transcription into a timeout."""


def speak(text: str) -> SpokenReply:
    """`text` segmented, synthesised with deterministic Piper, resampled to 24 kHz and its
    marks placed as the server does (the calibration benchmark's `synthesize`)."""
    return synthesize(loaded_synthesizer("piper"), Reply("test", "test", text))


def spoken_snapshot(text: str, played_ms: int) -> tuple[SpokenReply, HeardTextSnapshot]:
    """`text` spoken (`speak`) and the snapshot of a cut at `played_ms` with its audio and marks."""
    spoken = speak(text)
    return spoken, HeardTextSnapshot(
        response_id="resp_cut", text=text, pcm_f32le=spoken.pcm_f32le, sample_rate_hz=RATE_HZ,
        played_ms=played_ms, complete_audio_duration_ms=spoken.total_ms, word_marks=spoken.marks,
    )


@pytest.fixture(scope="module")
def reply() -> SpokenReply:
    return speak(REPLY)


async def test_asr_cuts_land_between_fully_played_and_started(reply: SpokenReply) -> None:
    assert not any(mark.estimated for mark in reply.marks), "ground truth needs exact marks"
    policy = asr_policy(LocalWhisperTranscriber())
    pcm = reply.pcm_f32le
    rows: list[tuple[int, int, int, int | None]] = []
    for cut in range(CUT_STEP_MS, reply.total_ms, CUT_STEP_MS):
        snapshot = HeardTextSnapshot(
            response_id="resp_acceptance", text=REPLY, pcm_f32le=pcm, sample_rate_hz=RATE_HZ,
            played_ms=cut, complete_audio_duration_ms=reply.total_ms, word_marks=reply.marks,
        )
        result = await policy.calibrate(snapshot)
        fully, started = heard_bounds(REPLY, list(reply.marks), cut)
        if result is not None:
            assert isinstance(result, HeardCut) and result.method == "asr"
        rows.append((cut, fully, started, None if result is None else int(result)))

    answered = [row for row in rows if row[3] is not None]
    landed = [row for row in answered if row[1] <= row[3] <= row[2]]
    too_long = [row for row in answered if row[3] > row[2]]
    refused = len(rows) - len(answered)
    ends = [unit.end for unit in units.text_units(REPLY)]
    one_short = [row for row in answered
                 if bisect_right(ends, row[1]) - bisect_right(ends, row[3]) == 1]
    summary = (
        f"{len(rows)} cuts every {CUT_STEP_MS} ms over {reply.total_ms} ms: "
        f"{len(answered)} answered, {len(landed)} landed "
        f"({len(landed) / max(len(answered), 1):.0%} of answered), "
        f"{len(answered) - len(landed) - len(too_long)} short ({len(one_short)} by exactly one "
        f"word), {len(too_long)} past started, "
        f"{refused} refused ({refused / len(rows):.0%}); "
        f"rows (cut, fully, started, result) = {rows}"
    )
    print(summary)
    assert not too_long, summary
    assert refused / len(rows) <= MAX_REFUSED, summary
    assert len(landed) >= math.ceil(MIN_LANDED * len(answered)), summary


@pytest.mark.parametrize(("text", "played_ms"), [
    # tiny.en writes the last heard word "in" as "and": a misheard final word still counts
    ("To bake a simple loaf, mix flour, water, salt and yeast, then let the dough rest until it "
     "doubles in size.", 6_000),
    # tiny.en writes "250 millilitres of" as "250ml of": the glued unit still reads "millilitres"
    ("For 4 people you need 500 grams of pasta, 2 cloves of garlic and 250 millilitres of "
     "cream.", 6_000),
    # Piper says "degrees" for "°" before the "C" starts; tiny.en writes "25 degrees."
    ("The trail is 12 km long and climbs about 800 m. Pack at least 2 L of water per person, "
     "and expect temperatures near 25 °C at midday.", 8_000),
])
async def test_asr_keeps_the_last_heard_word_the_recogniser_wrote_its_own_way(
    text: str, played_ms: int
) -> None:
    spoken, snapshot = spoken_snapshot(text, played_ms)
    result = await asr_policy(LocalWhisperTranscriber()).calibrate(snapshot)
    fully, started = heard_bounds(text, list(spoken.marks), played_ms)
    assert isinstance(result, HeardCut), result
    assert fully <= int(result) <= started, (result.asr_text, text[:result], text[:fully])


@pytest.mark.parametrize(("text", "played_ms", "dropped"), [
    # tiny.en writes "... from the west." and drops the "You" that was played whole after it
    ("Good morning! It looks like a bright day with a light breeze from the west. You might want "
     "a jacket for the evening, though, because the temperature drops quickly after sunset.",
     3_750, "You"),
    # "... approved on Monday." and no "It" ("$42.75" said as "forty-two dollars and seventy-five
    # cents": "It" is played whole from 4516 ms)
    ("Your refund of $42.75 was approved on Monday. It usually takes 3 to 5 business days to "
     "appear on your card, and you will get an email once it has been sent.", 4_600, "It"),
])
async def test_asr_refuses_when_the_recogniser_drops_a_word_played_whole(
    text: str, played_ms: int, dropped: str
) -> None:
    spoken, snapshot = spoken_snapshot(text, played_ms)
    fully, _started = heard_bounds(text, list(spoken.marks), played_ms)
    assert text[:fully].endswith(dropped), "the dropped word was fully played"
    transcript = await LocalWhisperTranscriber().transcribe(
        np.frombuffer(spoken.pcm_f32le, dtype="<f4")[: (played_ms - ASR_SAFETY_MARGIN_MS)
                                                      * RATE_HZ // 1000], RATE_HZ)
    assert not transcript.rstrip(" .").endswith(dropped), "the recogniser no longer drops it"
    assert await asr_policy(LocalWhisperTranscriber()).calibrate(snapshot) is None


def received_marks(client: RealtimeClient, response_id: str) -> list[WordMark]:
    """The word marks the client received on a response's audio deltas (reply timeline)."""
    return [
        WordMark(mark["char_start"], mark["char_end"], mark["start_ms"], mark["end_ms"],
                 mark["estimated"])
        for event in client.of_type("response.output_audio.delta", response_id=response_id)
        for mark in event.get("marks") or ()
    ]


async def play_and_barge_in(client: RealtimeClient, response_id: str, at_ms: int) -> None:
    """ACK every 500 ms of received audio up to `at_ms`, then barge in at `at_ms`."""
    for played in range(500, at_ms + 1, 500):
        await client.wait_audio_until(response_id, played)
        await client.ack(response_id, played)
    await client.barge_in(response_id, at_ms)
    await client.wait_for("response.done", lambda e: e["response"]["id"] == response_id)


async def test_server_with_remote_asr_stores_heard_prefix(start_server: Any) -> None:
    with TranscriptionEndpoint() as endpoint:
        server = await start_server(
            tts="piper", calibration="asr", asr_url=endpoint.url, lead_ms=60_000,
            calibration_timeout_ms=CALIBRATION_TIMEOUT_MS,
        )
        async with RealtimeClient.connect(server.ws_url) as client:
            response_id, item_id = await client.prompt(f"say: {REPLY}")
            await play_and_barge_in(client, response_id, BARGE_IN_MS)
            heard = await client.heard(item_id, lambda e: e["method"] == "asr")
            fully, started = heard_bounds(REPLY, received_marks(client, response_id),
                                          BARGE_IN_MS)
            assert heard["full_text"] == REPLY
            assert isinstance(heard["asr_text"], str) and heard["asr_text"]
            assert REPLY.startswith(heard["text"])
            assert fully > 0
            assert fully <= len(heard["text"]) <= started, (heard, fully, started)
            assert heard["played_ms"] == BARGE_IN_MS
            assert len(endpoint.requests) == 1
            item = await client.retrieve(item_id)
            assert item["content"][0]["transcript"] == heard["text"]


async def test_server_keeps_empty_history_when_asr_endpoint_fails(start_server: Any) -> None:
    with TranscriptionEndpoint() as endpoint:
        endpoint.status = 503
        server = await start_server(
            tts="piper", calibration="asr", asr_url=endpoint.url, lead_ms=60_000,
            calibration_timeout_ms=CALIBRATION_TIMEOUT_MS,
        )
        async with RealtimeClient.connect(server.ws_url) as client:
            response_id, item_id = await client.prompt(f"say: {REPLY}")
            await play_and_barge_in(client, response_id, BARGE_IN_MS)
            await asyncio.to_thread(endpoint.request_seen.wait, CALIBRATION_TIMEOUT_MS / 1000)
            assert len(endpoint.requests) == 1
            await client.drain(0.5)
            heard_events = client.of_type("conversation.item.heard", item_id=item_id)
            assert heard_events
            assert all(e["method"] == "none" and e["text"] == "" for e in heard_events)
            item = await client.retrieve(item_id)
            assert item["content"][0]["transcript"] == ""

            second_id, _ = await client.prompt("say: Are you still there? Yes, I am.")
            assert second_id != response_id
            audio = await client.wait_for(
                "response.output_audio.delta", lambda e: e["response_id"] == second_id
            )
            done = await client.wait_for(
                "response.done", lambda e: e["response"]["id"] == second_id
            )
            assert audio["audio_end_ms"] > 0
            assert done["response"]["status"] == "completed"
