"""Issue 24 on the real page: the person is always heard, and nothing else is. Headless Chromium
with a fake microphone (echo cancellation, noise suppression and auto gain on) against a real
demo server with the Piper voice; each case is one launch (tests/page_barge_in.py). The
server's VAD hears the same audio but never stops the reply: the page's VAD alone decides, so
a case the server would have stopped first still shows whether the page heard it.

- A short real interruption ("Stop.", "Wait.") over a Piper reply, with no echo in the
  microphone and over the reply's own echo 30 dB down: the page's VAD stops the reply, every
  time (before issue 24 the server's echo gate took such a "Stop" for the echo).
- The page's own echo alone, at several levels and lags: the echo path explains it, never a
  barge-in.

- Babble at -45 dBFS RMS with nobody speaking, heard for 4 s before the reply and while it
  plays: the page's VAD never stops the reply. Chromium's auto gain lifts the babble by 6 to
  12 dB before the reply and by 18 to 26 dB once it plays, while a reply's frames are never
  learned as the room; until the page followed the room's level through the reply
  (web/room-background.js), its VAD fired 4.5 s into it in 3 of 3 runs (and stopped it in 2;
  the server's VAD had stopped it first in the third, which the harness now rules out); until
  the page kept the last 10 s of room learned rather than of time, it fired 9.8 s into the
  reply, once the room had not been learned for 10 s (3 of 3 runs). The
  room's rules case by case, on the same recordings as the server's:
  tests/test_client_vad_rooms.py.

The grids behind these examples: `python -m benchmarks.bench_microphone --grid all`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests import room_sounds, speech_fixtures
from tests.cached_tts import SEND_AHEAD_MS, CachedSynthesizer
from tests.page_barge_in import (
    PERSON_PEAK_DBFS,
    Case,
    Outcome,
    reply_audio,
    run_case,
)

pytestmark = pytest.mark.timeout(240)
"""A case takes 8-20 s in Chromium; a void one (the playback stalled on a loaded machine) is
played again."""


@pytest.fixture
async def piper_server(start_server):
    """A Piper demo server whose reply is synthesized once, and that reply at 16 kHz."""
    server = await start_server(tts="piper", wrap_tts=CachedSynthesizer, lead_ms=SEND_AHEAD_MS)
    return server, await reply_audio(server.ws_url)


def summary(outcome: Outcome) -> tuple[float, list[tuple[Any, ...]]]:
    """How far the playback fell behind (ms) and the VAD events of a case, short (type, WAV
    ms, unexplained share, likeness, echo path lag ms)."""
    return outcome.behind_ms, [
        (e["type"], round(e["t"]), e.get("unexplained"), e.get("likeness"), e.get("echoLagMs"))
        for e in outcome.events if e["type"] != "released"]


@pytest.mark.parametrize("echo_db", [None, -30.0], ids=["no echo", "echo -30 dB"])
@pytest.mark.parametrize(("word", "engine", "voice", "position_ms"), [
    ("Stop.", "piper", None, 1000.0),
    ("Stop.", "piper", None, 1500.0),
    ("Stop.", "piper", None, 4500.0),
    ("Wait.", "espeak", "en-us+f3", 2500.0),
    ("Wait.", "espeak", "en-us", 5500.0),
])
async def test_a_short_interruption_stops_the_reply(
    piper_server, tmp_path: Path, word: str, engine: str, voice: str | None,
    position_ms: float, echo_db: float | None,
) -> None:
    """Issue 24's failing input 1 on the page: "Stop." / "Wait." at -6 dBFS over a Piper
    reply: the page's VAD fires within 800 ms of the onset and stops the reply. The server's
    VAD heard it too (it observes: `SERVER_VAD_OBSERVES`); "Stop." 1.0 s into the reply over
    the echo is the page grid's case where the server's VAD, stopping the reply first, hid
    whether the page's VAD heard it (it fired 190-200 ms after the onset in all three
    voices, and was counted missed)."""
    server, reply = piper_server
    person = speech_fixtures.at_peak_dbfs(speech_fixtures.speech(word, engine, voice),
                                          PERSON_PEAK_DBFS)
    case = Case(word, person, position_ms, echo_db)
    outcome = await run_case(server.http_url, case, reply, tmp_path)
    assert not outcome.void, f"the page's playback stalled in every play: {summary(outcome)}"
    assert outcome.heard, summary(outcome)
    assert outcome.onset_to_silence_ms is not None and outcome.onset_to_silence_ms < 400
    assert outcome.server_turns >= 1, summary(outcome)


@pytest.mark.parametrize(("peak_dbfs", "lag_ms"), [(-30.0, 0.0), (-18.0, 150.0), (-12.0, 50.0)])
async def test_the_pages_own_echo_never_barges_in(
    piper_server, tmp_path: Path, peak_dbfs: float, lag_ms: float,
) -> None:
    """The reply's own audio on the fake microphone (Chromium's echo canceller does not know
    it; its auto gain lifts it), 6 s of it: candidates start but the echo path explains them;
    the page never stops the reply."""
    server, reply = piper_server
    gain_db = peak_dbfs - 20 * float(np.log10(np.max(np.abs(reply))))
    case = Case(f"echo {peak_dbfs}", None, 0.0, gain_db, lag_ms, until_ms=6000.0)
    outcome = await run_case(server.http_url, case, reply, tmp_path)
    assert not outcome.void, f"the page's playback stalled in every play: {summary(outcome)}"
    assert not outcome.page_barge_in, summary(outcome)
    assert outcome.fired_ms is None, summary(outcome)


async def test_babble_never_barges_in(piper_server, tmp_path: Path) -> None:
    """Five-talker babble at -45 dBFS RMS (`tests.room_sounds.babble`) on the fake microphone
    from 4 s before the reply is asked for to past its end (the page grid's room case): the
    page's VAD never fires while the reply plays (the server's VAD hears the same audio but
    never stops the reply here: tests/page_barge_in.py `SERVER_VAD_OBSERVES`)."""
    server, reply = piper_server
    length_ms = 16_000.0
    case = Case("babble -45", room=room_sounds.babble(length_ms, -45.0), room_ms=length_ms)
    outcome = await run_case(server.http_url, case, reply, tmp_path)
    assert not outcome.page_barge_in, summary(outcome)
    assert not [e for e in outcome.events if e["type"] == "fired" and e["playing"]
                and e["t"] <= length_ms], summary(outcome)
