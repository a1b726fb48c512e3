"""`ReplyEcho`: a reply's echo reference computed on first use equals one computed eagerly.

The chunks are uniform-voice audio (the deterministic test voice), converted to PCM16 as the
server sends it, in pieces of uneven length (not whole 10 ms frames).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from server import reply_echo
from server.listening.band_envelope import ANALYSIS_MS, FRAME_MS, SILENCE_DB
from server.listening.pcm16 import float_to_pcm16
from server.reply_echo import ReplyEcho
from server.speech.synthesizer import StopSignal
from server.speech.uniform_tts import UniformSynthesizer

RATE_HZ = 24000


def reply_chunks() -> list[bytes]:
    """About 3 s of uniform-voice audio as PCM16 chunks of uneven sizes."""
    synthesizer = UniformSynthesizer()
    assert synthesizer.sample_rate_hz == RATE_HZ
    pcm = np.concatenate([chunk.pcm for chunk in synthesizer.synthesize(
        "The tides rise and fall twice a day, pulled by the moon.", StopSignal())])
    pcm16 = float_to_pcm16(pcm)
    cuts = [0, 2 * 1234, 2 * 9000, 2 * 9001, 2 * 30000, 2 * 47777, len(pcm16)]
    return [pcm16[a:b] for a, b in itertools.pairwise(cuts) if b > a]


def all_levels(echo: ReplyEcho) -> np.ndarray:
    reference = echo.reference()
    return reference.levels(0, 400)


def eager_levels(chunks: list[bytes]) -> np.ndarray:
    echo = ReplyEcho("resp_a", RATE_HZ, eager=True)
    for chunk in chunks:
        echo.add(chunk, echo.envelope(chunk))
    return all_levels(echo)


def test_held_audio_gives_the_eager_reference() -> None:
    chunks = reply_chunks()
    expected = eager_levels(chunks)
    assert (expected > -100).any()  # the audio is not silence
    echo = ReplyEcho("resp_a", RATE_HZ, eager=False)
    for chunk in chunks:
        echo.add(chunk, None)
    assert not echo.eager
    np.testing.assert_array_equal(all_levels(echo), expected)
    assert echo.eager


@pytest.mark.parametrize("asked_after", [1, 3, 5])
def test_asked_mid_reply_later_chunks_follow_in_order(asked_after: int) -> None:
    """Server VAD turned on mid-reply: the held chunks are computed at the first ask; the
    rest of the piece that was running (levels None) and later eager pieces follow."""
    chunks = reply_chunks()
    echo = ReplyEcho("resp_a", RATE_HZ, eager=False)
    for chunk in chunks[:asked_after]:
        echo.add(chunk, None)
    echo.reference()
    for index, chunk in enumerate(chunks[asked_after:]):
        echo.add(chunk, None if index == 0 else echo.envelope(chunk))
    np.testing.assert_array_equal(all_levels(echo), eager_levels(chunks))


def test_only_the_latest_hold_of_held_audio_is_kept_the_rest_reads_as_silence(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Held chunks older than HOLD_MS behind the newest are dropped; their positions read as
    silence and every later level stays at its position (equal to the eager reference once
    the analysis window has left the dropped audio)."""
    monkeypatch.setattr(reply_echo, "HOLD_MS", 1000)
    chunks = reply_chunks()
    sizes = [len(chunk) // 2 for chunk in chunks]
    echo = ReplyEcho("resp_a", RATE_HZ, eager=False)
    for chunk in chunks:
        echo.add(chunk, None)
    kept, dropped = 0, 0
    for size in reversed(sizes):  # the newest chunks whose removal would leave < 1 s
        if kept and kept >= RATE_HZ:
            dropped += size
        else:
            kept += size
    assert dropped > 0
    levels, expected = all_levels(echo), eager_levels(chunks)
    first_exact = (dropped * 1000 // RATE_HZ + ANALYSIS_MS) // FRAME_MS
    silent = dropped * 1000 // RATE_HZ // FRAME_MS
    assert (levels[:silent] == SILENCE_DB).all()
    np.testing.assert_array_equal(levels[first_exact:], expected[first_exact:])
