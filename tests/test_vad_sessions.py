"""One session never affects another: a session's turn events and the transcript of its turn
are the same whatever sessions the process ran before or runs beside it.

The server keeps one Silero model (an onnxruntime session shared by every
`SileroStreamingVad`) and one whisper model per process; everything else a session's
listening keeps (the streaming resampler, Silero's LSTM state, `TurnDetector`, `EchoDetector`,
`RoomBackground`) is its own. Here the same microphone audio is judged (the server's
`InputSpeechDetector`, 40 ms appends) and its turn transcribed (`person_transcriber`, tiny.en)
in a fresh Python process, and in this process after other sessions (a quiet room with the
person, loud babble that runs into `max_turn_ms`, a TV) and interleaved append by append with
another session: the events and the transcript must be identical.

Found while tracing why `benchmarks/bench_rooms.py` found the person over babble at -65 dBFS
8 of 10 times in one run and 10 of 10 in a fresh process: not the detector (this test), but
the audio: espeak-ng's output depended on what the library spoke before in the process, and
the babble's talkers are espeak-ng voices (now each text is spoken in a fresh process:
`server.speech.espeak_engine.synthesize_in_fresh_process`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from calibration.local_asr import person_transcriber
from server.listening.input_speech import InputSpeechDetector
from server.listening.server_vad_settings import UTTERANCE_TAIL_MS, TurnDetection
from server.listening.turn_events import SpeechStarted, SpeechStopped, TurnEvent
from tests import room_sounds as rs
from tests import speech_fixtures as fx
from tests.test_rooms import (
    APPEND_MS,
    FLOOR_DBFS,
    INPUT_RATE_HZ,
    mic_pcm16,
    person,
    room,
    with_person,
)

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def appends(pcm16: bytes) -> list[bytes]:
    """`pcm16` (PCM16 LE at `INPUT_RATE_HZ`) cut into `APPEND_MS` appends."""
    step = INPUT_RATE_HZ * 2 * APPEND_MS // 1000
    return [pcm16[start:start + step] for start in range(0, len(pcm16), step)]


def new_detector(max_turn_ms: int = 30_000) -> InputSpeechDetector:
    return InputSpeechDetector(TurnDetection(), INPUT_RATE_HZ, 0, max_turn_ms)


def session_events(pcm16: bytes, max_turn_ms: int = 30_000) -> list[TurnEvent]:
    """One session's turn events over `pcm16` appended in `APPEND_MS` appends."""
    detector = new_detector(max_turn_ms)
    return [event for chunk in appends(pcm16) for event in detector.feed(chunk, False)]


def first_turn_transcript(pcm16: bytes, events: list[TurnEvent]) -> str:
    """tiny.en (`person_transcriber`) on the first turn's audio, as a commit takes it (speech
    start .. speech stop + `UTTERANCE_TAIL_MS`)."""
    start_ms = next(e.audio_start_ms for e in events if isinstance(e, SpeechStarted))
    end_ms = next(e.audio_end_ms for e in events if isinstance(e, SpeechStopped))
    bytes_per_ms = INPUT_RATE_HZ * 2 // 1000
    turn = pcm16[start_ms * bytes_per_ms:(end_ms + UTTERANCE_TAIL_MS) * bytes_per_ms]
    samples = np.frombuffer(turn, dtype="<i2").astype(np.float32) / 32768.0
    return str(person_transcriber().transcribe_blocking(samples, INPUT_RATE_HZ))


def judged(pcm16: bytes, events: list[TurnEvent]) -> dict[str, object]:
    return {"events": [repr(e) for e in events],
            "transcript": first_turn_transcript(pcm16, events)}


def fresh_process_main() -> None:
    """Entry point of the fresh process: judge the PCM16 file named by argv[1], print JSON."""
    pcm16 = Path(sys.argv[1]).read_bytes()
    print(json.dumps(judged(pcm16, session_events(pcm16))))


def other_sessions() -> list[bytes]:
    """Sessions that leave every shared object used: the person in a quiet room, loud babble
    that holds a turn until `max_turn_ms`, a TV talker."""
    quiet = rs.at_rms_dbfs(fx.pink_noise(np.random.default_rng(11), 4000), FLOOR_DBFS)
    loud = np.concatenate((quiet[:16_000], room("babble", -25.0, 8000, seed=3)))
    return [mic_pcm16(with_person(quiet, person("What is the weather like today?"), 500)),
            mic_pcm16(loud), mic_pcm16(room("tv", -45.0, 6000, seed=2))]


def test_a_session_s_turns_and_transcript_do_not_depend_on_other_sessions(tmp_path) -> None:
    """The person at -20 dBFS RMS over babble at -65 dBFS RMS (`bench_rooms`' scene 5):
    judged and transcribed alone in a fresh process, here after other sessions, and here
    interleaved append by append with another session: the same events and transcript."""
    mic = mic_pcm16(with_person(room("babble", -65.0, 10_000, seed=5, floor_seed=105),
                                person(), 4000))
    recording = tmp_path / "mic.pcm"
    recording.write_bytes(mic)
    fresh = subprocess.run(
        [sys.executable, "-c",
         "from tests.test_vad_sessions import fresh_process_main; fresh_process_main()",
         str(recording)],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300, check=True)
    alone = json.loads(fresh.stdout.strip().splitlines()[-1])
    assert any("SpeechStarted" in e for e in alone["events"]), alone
    assert "second step" in alone["transcript"].lower(), alone

    others = other_sessions()
    for earlier in others:
        events = session_events(earlier, max_turn_ms=4000)
        if any(isinstance(e, SpeechStopped) for e in events):
            first_turn_transcript(earlier, events)
    assert judged(mic, session_events(mic)) == alone

    beside, this = new_detector(4000), new_detector()
    beside_appends = appends(others[1])
    events = []
    for index, chunk in enumerate(appends(mic)):
        if index < len(beside_appends):
            beside.feed(beside_appends[index], False)
        events += this.feed(chunk, False)
    assert judged(mic, events) == alone
