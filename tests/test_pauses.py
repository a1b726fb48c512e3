"""Pause, then decide, in the sans-I/O session: pauses stop sending, resumes continue exactly
where sending stopped, the timeout rule, cuts at the paused position, `session.interruption`."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from server.listening.quiet_after_speech import HeardSound
from server.listening.server_vad_settings import DECISION_TAIL_MS, UTTERANCE_TAIL_MS
from server.realtime.effects import (
    DecideTranscription,
    PrepareTranscription,
    Transcribe,
    WakeSender,
)
from server.realtime.pauses import RESUME_SILENCE_MS
from server.realtime.session import Session, SessionConfig
from tests import speech_fixtures
from tests.pausing_page import mic_pcm16
from tests.test_session import start_reply, types


def send(target: Session, **event: Any) -> list[dict[str, Any]]:
    target.receive(json.dumps(event))
    return target.take_events()

REPLY = "one two three four five six seven eight nine ten eleven twelve."


def paused_session(**interruption: Any) -> tuple[Session, str]:
    """A session under server VAD whose client ACKed 400 ms of a 4800 ms reply (800 ms sent),
    then spoke (speech started at input 0 ms, clock 400 ms): the reply is paused."""
    session = Session(SessionConfig(lead_ms=400, jitter_ms=100, frame_ms=100))
    send(session, type="session.update", **{"session": {
        "audio": {"input": {"turn_detection": {"type": "server_vad"}}},
        **({"interruption": interruption} if interruption else {})}})
    rid = start_reply(session, REPLY, 4800)
    session.pull_outbound(now_ms=0.0)
    session.set_clock(400.0)
    send(session, type="playback.ack", response_id=rid, played_ms=400)
    session.pull_outbound(now_ms=400.0)
    session.take_events()
    session.turn_taking.on_speech_started(0)
    return session, rid


def sent_ends(events: list[dict[str, Any]]) -> list[int]:
    return [e["audio_end_ms"] for e in events if e["type"] == "response.output_audio.delta"]


def okay_stop_first_gap(voice: str) -> tuple[Session, str, str, DecideTranscription]:
    """`paused_session`, then espeak-ng `voice`'s "Okay. Stop." in the microphone (300 ms of
    silence either side) and server VAD's gap after "Okay" at 650 ms: (the session, the
    paused response's id, the turn's item id, the decision transcription that gap asked)."""
    session, rid = paused_session()
    session.take_events()
    okay_stop = mic_pcm16(speech_fixtures.place(speech_fixtures.speech(
        "Okay. Stop.", "espeak", voice), 300, 300))
    session.input_turns.audio.append(okay_stop)
    item_id = session.input_turns.speech_turn[0]
    session.turn_taking.on_speech_gap(650)
    [decide] = [e for e in session.take_effects() if isinstance(e, DecideTranscription)]
    return session, rid, item_id, decide


def assert_cut_where_paused(session: Session, rid: str) -> None:
    """The events since the last take cut the reply at its paused position (400 ms), with no
    resume first."""
    events = session.take_events()
    assert "response.resumed" not in types(events)
    assert types(events)[:2] == ["output_audio_buffer.cleared", "response.output_audio.done"]
    assert session.responses[rid].cursor.cutoff_ms == 400


def test_speech_pauses_the_reply_and_nothing_more_is_sent() -> None:
    session, rid = paused_session()
    events = session.take_events()
    assert types(events) == ["input_audio_buffer.speech_started", "response.paused"]
    assert events[1] | {"event_id": None} == {
        "type": "response.paused", "event_id": None, "response_id": rid,
        "item_id": session.responses[rid].item_id, "audio_end_ms": 400,
        "reason": "speech_started"}
    assert session.pull_outbound(now_ms=2000.0) == 400.0 + 2500, "the timeout is the deadline"
    assert sent_ends(session.take_events()) == []
    assert session.responses[rid].active


def test_a_backchannel_transcript_resumes_where_sending_stopped_and_is_no_turn() -> None:
    session, rid = paused_session()
    session.take_events()
    uh_huh = mic_pcm16(speech_fixtures.place(speech_fixtures.speech("uh-huh", "espeak",
                                                                    "en-us"), 300, 300))
    session.input_turns.audio.append(uh_huh)
    session.turn_taking.on_speech_paused(700)
    item_id = session.input_turns.speech_turn[0]
    session.set_clock(1200.0)
    session.turn_taking.on_prepared_transcription(item_id, "Uh-uh.")
    session.turn_taking.on_vad_position(HeardSound(700 + RESUME_SILENCE_MS - 1))
    assert session.take_events() == [], "held until the person is done"
    session.turn_taking.on_vad_position(HeardSound(700 + RESUME_SILENCE_MS))
    events = session.take_events()
    assert types(events) == ["input_audio_buffer.backchannel", "response.resumed"]
    assert events[0]["transcript"] == "Uh-uh." and events[0]["rule"] == "murmur_h"
    assert (events[1]["reason"], events[1]["audio_end_ms"], events[1]["paused_ms"]) == (
        "backchannel", 400, 800)
    history = [(item.role, item.id) for item in session.history]
    session.turn_taking.on_speech_stopped(700)
    assert types(session.take_events()) == ["input_audio_buffer.speech_stopped"]
    assert not [e for e in session.take_effects() if isinstance(e, Transcribe)]
    assert [(item.role, item.id) for item in session.history] == history
    session.set_clock(1300.0)
    send(session, type="playback.ack", response_id=rid, played_ms=500)
    session.pull_outbound(now_ms=1300.0)
    assert sent_ends(session.take_events()) == [900], "continues after the 800 ms sent"


def test_speech_before_the_person_is_done_voids_a_backchannel_and_the_whole_decides() -> None:
    """"Okay. (420 ms) Stop.": the verdict on "Okay" waits for `RESUME_SILENCE_MS` of silence;
    the person speaks on first, so the reply stays paused, and the turn's next gap decides
    on all of it: "Stop" cuts at the paused position, with no word played between."""
    session, rid, item_id, decide = okay_stop_first_gap("en-us+m3")
    session.turn_taking.on_decision_transcription(item_id, decide.audio_end_ms, "Okay.")
    session.turn_taking.on_vad_position(HeardSound(650 + 350))
    session.turn_taking.on_speech_resumed()
    session.turn_taking.on_vad_position(HeardSound(650 + RESUME_SILENCE_MS + 400))
    assert session.take_events() == [], "no resume: the person was not done"
    session.turn_taking.on_speech_gap(1400)
    [decide] = [e for e in session.take_effects() if isinstance(e, DecideTranscription)]
    session.turn_taking.on_decision_transcription(item_id, decide.audio_end_ms, "Okay, stop.")
    assert_cut_where_paused(session, rid)


def test_a_backchannel_verdict_after_the_next_turn_began_lets_that_turn_decide() -> None:
    """A loaded machine: "Okay." stopped (its decision still transcribing) and the person's
    "Stop." started a new turn before the verdict on "Okay" came. The verdict resumed the
    reply at once (its turn had ended), and "Stop" then found the reply playing (over the
    protocol, 1 of 1 under load 12). Now the new turn decides the pause: no resume, and its
    words cut the reply where it paused."""
    session, rid, okay_id, decide = okay_stop_first_gap("en-us+f3")
    session.turn_taking.on_vad_position(HeardSound(1000))
    session.turn_taking.on_speech_stopped(650)
    session.turn_taking.on_speech_started(1000)
    stop_id = session.input_turns.speech_turn[0]
    session.turn_taking.on_decision_transcription(okay_id, decide.audio_end_ms, "Okay.")
    session.turn_taking.on_vad_position(HeardSound(1400))
    assert "response.resumed" not in types(session.take_events())
    session.turn_taking.on_speech_gap(1400)
    [decide] = [e for e in session.take_effects() if isinstance(e, DecideTranscription)]
    assert decide.item_id == stop_id
    session.turn_taking.on_decision_transcription(stop_id, decide.audio_end_ms, "Stop.")
    assert_cut_where_paused(session, rid)


def test_a_backchannel_verdict_after_the_next_turn_was_committed_lets_its_words_decide(
        ) -> None:
    """Load 12 over the protocol: the verdict on "Okay" took 1.4 s, and "Stop." had started,
    stopped and been committed by then; the verdict resumed the reply for a moment before
    "Stop"'s answer cut it. Now the committed turn's transcript decides the pause."""
    session, rid, okay_id, decide = okay_stop_first_gap("en-us+f3")
    session.turn_taking.on_speech_stopped(650)
    session.turn_taking.on_speech_started(1000)
    stop_id = session.input_turns.speech_turn[0]
    session.turn_taking.on_speech_stopped(1500)
    session.turn_taking.on_vad_position(HeardSound(2100, 1500))
    session.turn_taking.on_decision_transcription(okay_id, decide.audio_end_ms, "Okay.")
    session.turn_taking.on_vad_position(HeardSound(2200, 1500))
    assert "response.resumed" not in types(session.take_events())
    session.turn_taking.on_transcription(stop_id, "Stop.")
    assert_cut_where_paused(session, rid)


def test_a_never_word_cuts_at_the_paused_position() -> None:
    session, rid = paused_session()
    session.take_events()
    wait = mic_pcm16(speech_fixtures.place(speech_fixtures.speech("wait", "espeak", "en-us"),
                                           300, 300))
    session.input_turns.audio.append(wait)
    session.turn_taking.on_speech_paused(700)
    session.turn_taking.on_prepared_transcription(session.input_turns.speech_turn[0], "Wait.")
    events = session.take_events()
    assert types(events)[:2] == ["output_audio_buffer.cleared", "response.output_audio.done"]
    done = next(e for e in events if e["type"] == "response.done")
    assert done["response"]["status_details"] == {"type": "cancelled", "reason": "turn_detected"}
    assert session.responses[rid].cursor.cutoff_ms == 400


def test_speech_longer_than_a_backchannel_cuts_without_waiting_for_words() -> None:
    session, _ = paused_session(max_backchannel_ms=800)
    session.take_events()
    session.input_turns.audio.append(bytes(24000 * 2 * 1100 // 1000))
    session.pauses.appended(session.input_turns.audio.end_ms)
    assert session.take_events() == [], "800 + the 300 ms tail: could still pause"
    session.input_turns.audio.append(bytes(24000 * 2 * 20 // 1000))
    session.pauses.appended(session.input_turns.audio.end_ms)
    events = session.take_events()
    cleared = next(e for e in events if e["type"] == "output_audio_buffer.cleared")
    assert cleared["reason"] == "speech_continued"


def test_the_page_s_barge_in_on_a_reply_server_vad_paused_keeps_it_paused_for_the_words() -> None:
    """Server VAD paused the reply first, then the page's VAD fired on the same speech and sent
    `barge_in` with `pause` (tests/test_browser_microphone.py, the CI rehearsal of f4d8d10):
    the reply stays paused, where the page stopped rendering it, with no second
    `response.paused`; the utterance decides, and speech longer than a backchannel cuts it
    there, never resumed."""
    session, rid = paused_session(max_backchannel_ms=800)
    session.take_events()
    assert send(session, type="barge_in", response_id=rid, audio_end_ms=450, source="vad",
                pause=True) == []
    assert session.pauses.current is not None
    assert (session.pauses.current.reason, session.pauses.current.audio_end_ms) == (
        "speech_started", 450)
    session.input_turns.audio.append(bytes(24000 * 2 * 1120 // 1000))
    session.pauses.appended(session.input_turns.audio.end_ms)
    events = session.take_events()
    assert "response.resumed" not in types(events)
    cleared = next(e for e in events if e["type"] == "output_audio_buffer.cleared")
    assert cleared["reason"] == "speech_continued"
    assert session.responses[rid].cursor.cutoff_ms == 450


@pytest.mark.parametrize(("turn", "expected"), [(False, "response.resumed"),
                                                (True, "output_audio_buffer.cleared")])
def test_the_timeout_resumes_without_speech_and_cuts_over_undecided_speech(
        turn: bool, expected: str) -> None:
    """The client's VAD paused the reply: with no server VAD turn (a cough) the timeout
    resumes; with a turn still undecided it cuts."""
    session = Session(SessionConfig(lead_ms=400, jitter_ms=100, frame_ms=100))
    rid = start_reply(session, REPLY, 4800)
    session.pull_outbound(now_ms=0.0)
    session.set_clock(1000.0)
    send(session, type="playback.ack", response_id=rid, played_ms=400)
    events = send(session, type="barge_in", response_id=rid, audio_end_ms=450, source="vad",
                  pause=True)
    assert [(e["type"], e["reason"], e["audio_end_ms"]) for e in events] == [
        ("response.paused", "barge_in", 450)]
    if turn:
        send(session, type="session.update",
             **{"session": {"audio": {"input": {"turn_detection": {"type": "server_vad"}}}}})
        session.turn_taking.on_speech_started(0)
        session.pauses.attach_turn(session.input_turns.speech_turn[0], 0)
    assert session.pull_outbound(now_ms=3000.0) == 3500.0
    session.take_events()
    session.pull_outbound(now_ms=3500.0)
    events = session.take_events()
    assert expected in types(events)
    reason = next(e for e in events if e["type"] == expected)["reason"]
    assert reason == "timeout"


def test_session_interruption_is_validated_and_reported() -> None:
    session = Session()
    events = send(session, type="session.update", **{"session": {"interruption": {
        "mode": "cancel", "pause_timeout_ms": 4000}}})
    assert events[0]["session"]["interruption"] == {
        "mode": "cancel", "pause_timeout_ms": 4000, "max_backchannel_ms": 1500,
        "language": "en"}
    for bad, param in (({"mode": "maybe"}, "session.interruption.mode"),
                       ({"pause_timeout_ms": 5}, "session.interruption.pause_timeout_ms"),
                       ({"language": "xx"}, "session.interruption.language"),
                       ({"colour": 1}, "session.interruption.colour"),
                       ([], "session.interruption")):
        events = send(session, type="session.update", **{"session": {"interruption": bad}})
        assert [(e["type"], e["error"]["param"]) for e in events] == [("error", param)]
    assert session.pauses.settings.mode == "cancel"


def test_a_pause_never_settles_the_history() -> None:
    """ACKs while paused (the client played everything it had) do not cut the reply: the
    calibration never cuts on a pause that resumes."""
    session, rid = paused_session()
    session.responses[rid].generation_ended = True
    session.set_clock(1500.0)
    events = send(session, type="playback.ack", response_id=rid, played_ms=800)
    assert "conversation.item.heard" not in types(events) or not any(
        e.get("interrupted") for e in events)
    assert not session.history.get(session.responses[rid].item_id).interrupted
    assert np.isfinite(session.pull_outbound(now_ms=1500.0))


def decisions(session: Session) -> list[DecideTranscription]:
    return [e for e in session.take_effects() if isinstance(e, DecideTranscription)]


def spoken_turn(session: Session, word: str) -> str:
    """`word` (espeak-ng en-us, 300 ms of silence each side) appended as the paused reply's
    deciding turn, which started at input 0 ms; its item id."""
    session.take_events()
    session.input_turns.audio.append(mic_pcm16(speech_fixtures.place(
        speech_fixtures.speech(word, "espeak", "en-us"), 300, 300)))
    turn = session.input_turns.speech_turn
    assert turn is not None
    return turn[0]


def test_a_backchannel_is_decided_at_its_gap_and_its_stop_waits_for_the_verdict() -> None:
    """The gap (`DECISION_TAIL_MS` of silence) starts the deciding transcription of the speech
    and that much silence; the pause prepares nothing more and the stop commits nothing while
    it runs; its verdict resumes the reply and the held turn is dropped: no item, no
    transcription."""
    session, _ = paused_session()
    item_id = spoken_turn(session, "uh-huh")
    session.turn_taking.on_speech_gap(700)
    [decide] = decisions(session)
    assert (decide.item_id, decide.audio_start_ms, decide.audio_end_ms) == (item_id, 0, 700)
    assert len(decide.pcm16) == 24000 * 2 * (700 + DECISION_TAIL_MS) // 1000
    session.turn_taking.on_speech_paused(700)
    session.turn_taking.on_speech_stopped(700)
    assert not [e for e in session.take_effects() if not isinstance(e, WakeSender)]
    assert types(session.take_events()) == ["input_audio_buffer.speech_stopped"]
    history = [item.id for item in session.history]
    session.set_clock(1000.0)
    session.turn_taking.on_decision_transcription(item_id, 700, "Uh-uh.")
    events = session.take_events()
    assert types(events) == ["input_audio_buffer.backchannel", "response.resumed"]
    assert (events[1]["reason"], events[1]["paused_ms"]) == ("backchannel", 600)
    assert not [e for e in session.take_effects() if isinstance(e, Transcribe)]
    assert [item.id for item in session.history] == history
    assert item_id not in session.items.reserved


def test_an_interruption_decided_at_its_gap_cuts_and_its_turn_keeps_the_decision_s_words(
) -> None:
    """An interruption's verdict cuts at once; the held turn is then committed with the whole
    `UTTERANCE_TAIL_MS`, and as nothing audible follows the decision's audio (the sound of
    "wait" ends 700 ms in, before its speech end + `DECISION_TAIL_MS`), with the decision's
    transcript: no second transcription before the answer."""
    session, rid = paused_session()
    item_id = spoken_turn(session, "wait")
    session.turn_taking.on_speech_gap(600)
    session.turn_taking.on_speech_paused(600)
    session.turn_taking.on_speech_stopped(600)
    session.take_effects()
    session.take_events()
    session.turn_taking.on_decision_transcription(item_id, 600, "Wait.")
    events = session.take_events()
    assert types(events)[0] == "output_audio_buffer.cleared"
    assert "input_audio_buffer.committed" in types(events)
    assert session.responses[rid].cursor.cutoff_ms == 400
    [transcribe] = [e for e in session.take_effects() if isinstance(e, Transcribe)]
    assert (transcribe.item_id, transcribe.transcript) == (item_id, "Wait.")
    assert len(transcribe.pcm16) == 24000 * 2 * (600 + UTTERANCE_TAIL_MS) // 1000


def test_a_backchannel_verdict_before_the_pause_prepares_nothing() -> None:
    """The backchannel's verdict came back before the utterance tail passed: its pause
    prepares no transcription (CI counted two), and its stop drops the turn."""
    session, _ = paused_session()
    item_id = spoken_turn(session, "uh-huh")
    session.turn_taking.on_speech_gap(700)
    session.take_effects()
    session.turn_taking.on_decision_transcription(item_id, 700, "Uh-huh.")
    assert session.take_events() == [], "held until the person is done"
    session.turn_taking.on_speech_paused(700)
    session.turn_taking.on_speech_stopped(700)
    assert types(session.take_events()) == ["input_audio_buffer.speech_stopped",
                                             "input_audio_buffer.backchannel",
                                             "response.resumed"], "the turn ended: done"
    assert not [e for e in session.take_effects()
                if isinstance(e, PrepareTranscription | Transcribe)]
    assert item_id not in session.items.reserved


def test_a_verdict_before_the_pause_keeps_its_words_and_prepares_nothing() -> None:
    """A decision in the person's short ASR window is often back before the utterance tail
    (`UTTERANCE_TAIL_MS`) passed: the pause then prepares no second transcription of the
    same words (it did, and CI counted two), and the commit keeps the verdict's."""
    session, _ = paused_session()
    item_id = spoken_turn(session, "wait")
    session.turn_taking.on_speech_gap(600)
    session.take_effects()
    session.turn_taking.on_decision_transcription(item_id, 600, "Wait.")
    session.turn_taking.on_speech_paused(600)
    assert not [e for e in session.take_effects() if isinstance(e, PrepareTranscription)]
    session.turn_taking.on_speech_stopped(600)
    [transcribe] = [e for e in session.take_effects() if isinstance(e, Transcribe)]
    assert (transcribe.item_id, transcribe.transcript, transcribe.prepared) == (
        item_id, "Wait.", False)


def test_a_cut_turn_with_sound_after_the_decision_s_audio_is_transcribed_again() -> None:
    """When the turn's audio goes on sounding after the decision's (its speech end as server
    VAD saw it + `DECISION_TAIL_MS`: here 550 ms, while "wait" sounds until 700 ms), the
    committed turn, with the whole `UTTERANCE_TAIL_MS`, is transcribed anew; a verdict
    before the stop prepares that transcription, which the commit claims."""
    session, _ = paused_session()
    item_id = spoken_turn(session, "wait")
    session.turn_taking.on_speech_gap(400)
    session.turn_taking.on_speech_paused(400)
    session.take_effects()
    session.turn_taking.on_decision_transcription(item_id, 400, "Wait.")
    [prepare] = [e for e in session.take_effects() if isinstance(e, PrepareTranscription)]
    assert len(prepare.pcm16) == 24000 * 2 * (400 + UTTERANCE_TAIL_MS) // 1000
    session.turn_taking.on_speech_stopped(400)
    [transcribe] = [e for e in session.take_effects() if isinstance(e, Transcribe)]
    assert transcribe.prepared and transcribe.transcript is None
    assert transcribe.pcm16 == prepare.pcm16


def test_a_verdict_on_speech_the_person_continued_is_ignored() -> None:
    """Speech after the gap ("uh" ... "uh" of "uh-uh") makes the decision on the first part
    stale: its transcript decides nothing; the next gap decides the whole utterance."""
    session, _ = paused_session()
    item_id = spoken_turn(session, "uh-uh")
    session.turn_taking.on_speech_gap(300)
    session.turn_taking.on_speech_resumed()
    session.take_effects()
    session.turn_taking.on_decision_transcription(item_id, 300, "Uh.")
    assert session.take_events() == [] and session.pauses.current is not None
    session.turn_taking.on_speech_gap(700)
    [decide] = decisions(session)
    assert decide.audio_end_ms == 700
    session.turn_taking.on_decision_transcription(item_id, 700, "No.")
    assert types(session.take_events())[0] == "output_audio_buffer.cleared"


def test_a_transcript_prepared_before_the_person_spoke_on_decides_nothing() -> None:
    """A tester's Piper "Right, but why?" (a 260 ms pause after "Right,") resumed the reply
    on "right.": a transcription prepared at the pause after "Right," came back after "but
    why?" was heard and was held as the verdict. Speech after the pause discards it, its
    late transcript decides nothing, and the whole utterance decides at its next gap."""
    session, rid = paused_session()
    item_id = spoken_turn(session, "Right, but why?")
    session.turn_taking.on_speech_paused(500)
    assert [e for e in session.take_effects() if isinstance(e, PrepareTranscription)]
    session.turn_taking.on_speech_resumed()
    session.turn_taking.on_prepared_transcription(item_id, "Right.")
    session.turn_taking.on_speech_gap(1400)
    session.turn_taking.on_vad_position(HeardSound(1400 + RESUME_SILENCE_MS + 100))
    assert session.take_events() == [] and session.pauses.current is not None
    [decide] = decisions(session)
    session.turn_taking.on_decision_transcription(item_id, decide.audio_end_ms,
                                                  "Right, but why?")
    assert_cut_where_paused(session, rid)


def test_the_timeout_cuts_while_the_deciding_transcription_runs() -> None:
    """A pause whose turn stopped and waits for its decision is undecided: the timeout cuts
    (never resume over words not understood); the late verdict then commits the turn."""
    session, _ = paused_session()
    item_id = spoken_turn(session, "uh-huh")
    session.turn_taking.on_speech_gap(700)
    session.turn_taking.on_speech_stopped(700)
    session.take_events()
    session.pull_outbound(now_ms=400.0 + 2500)
    assert "output_audio_buffer.cleared" in types(session.take_events())
    session.turn_taking.on_decision_transcription(item_id, 700, "Uh-huh.")
    assert "input_audio_buffer.committed" in types(session.take_events())


def test_a_cleared_input_leaves_no_utterance_and_a_committed_one_decides() -> None:
    """A tester's client cleared the input audio while server VAD's speech paused the reply:
    it was cut a second later as `speech_continued`; a client's own commit of "wait" there
    was transcribed and never answered. Cleared (or server VAD turned off): no utterance
    decides, the timeout rule resumes. Committed by the client: its words decide."""
    session, rid = paused_session()
    session.input_turns.audio.append(b"\x01\x00" * 24 * 600)
    send(session, type="input_audio_buffer.clear")
    session.take_events()
    session.input_turns.audio.append(b"\x01\x00" * 24 * 2000)
    session.pauses.appended(session.input_turns.audio.end_ms)
    assert session.pull_outbound(now_ms=2900.0) is not None
    events = session.take_events()
    assert [(e["type"], e.get("reason")) for e in events if e["type"] in (
        "response.resumed", "output_audio_buffer.cleared")] == [("response.resumed", "timeout")]

    session, rid = paused_session()
    wait = mic_pcm16(speech_fixtures.place(speech_fixtures.speech("wait", "espeak", "en-us"),
                                           300, 300))
    session.input_turns.audio.append(wait)
    [committed] = [e for e in send(session, type="input_audio_buffer.commit")
                   if e["type"] == "input_audio_buffer.committed"]
    session.turn_taking.on_transcription(committed["item_id"], "Wait.")
    events = session.take_events()
    assert ("output_audio_buffer.cleared", "interruption") in [
        (e["type"], e.get("reason")) for e in events]
    assert not session.responses[rid].active
    assert "response.created" in types(events), "the words are answered"


def cough_turn_at_its_gap() -> tuple[Session, str, str]:
    """`paused_session`, a 150 ms cough 300 ms into the microphone and server VAD's gap after
    it at 450 ms: (the session, the paused response's id, the turn's item id); the effects
    are taken."""
    session, rid = paused_session()
    session.take_events()
    cough = speech_fixtures.white_noise_burst(np.random.default_rng(3), 150.0, -20.0)
    session.input_turns.audio.append(mic_pcm16(speech_fixtures.place(cough, 300, 300)))
    item_id = session.input_turns.speech_turn[0]
    session.turn_taking.on_speech_gap(450)
    return session, rid, item_id


def decide_on(session: Session, item_id: str, transcript: str) -> None:
    """The decision transcription the last gap asked for came back as `transcript`."""
    [decide] = [e for e in session.take_effects() if isinstance(e, DecideTranscription)]
    session.turn_taking.on_decision_transcription(item_id, decide.audio_end_ms, transcript)


def test_speech_resuming_a_turn_whose_noise_resumed_the_reply_pauses_it_again() -> None:
    """The deciding turn began with a sound with no words (a cough: `noise`, the reply
    resumes at once), then its speech went on (server VAD's speech resumed, same turn): the
    reply pauses again, at once, as after a backchannel's resume; before, it played on over the
    person until the turn ended (the page's VAD, fired on them during the pause, does not fire
    again on the same speech)."""
    session, rid, item_id = cough_turn_at_its_gap()
    session.set_clock(1200.0)
    decide_on(session, item_id, "")
    events = session.take_events()
    assert [(e["type"], e.get("reason")) for e in events] == [("response.resumed", "noise")]
    session.set_clock(1300.0)
    session.turn_taking.on_speech_resumed()
    events = session.take_events()
    assert [(e["type"], e.get("reason"), e["response_id"]) for e in events] == [
        ("response.paused", "speech_started", rid)]


def test_the_page_s_barge_in_after_a_noise_keeps_the_reply_paused_for_the_person_s_words(
        ) -> None:
    """Server VAD paused the reply on a cough; the page's VAD then fired on the person going
    on after it (its `barge_in` arrived with the input past the cough's end): the `noise`
    verdict no longer resumes the reply, the same turn speaking on does not pause it twice,
    and its words at the next gap cut it where it paused. Before, the reply resumed on the
    noise and paused again 250-400 ms later, the person talked over (the page's `barge_in`
    carries no input position: the input received when it arrives is the measure)."""
    session, rid, item_id = cough_turn_at_its_gap()
    session.input_turns.audio.append(bytes(2 * 24000 * 300 // 1000))
    assert send(session, type="barge_in", response_id=rid, audio_end_ms=420, source="vad",
                pause=True) == []
    session.set_clock(1200.0)
    decide_on(session, item_id, "")
    assert session.take_events() == []
    session.turn_taking.on_speech_resumed()
    assert session.take_events() == []
    session.input_turns.audio.append(bytes(2 * 24000 * 500 // 1000))
    session.turn_taking.on_speech_gap(1300)
    decide_on(session, item_id, "Wait, stop.")
    events = session.take_events()
    assert "response.resumed" not in types(events)
    assert types(events)[:2] == ["output_audio_buffer.cleared", "response.output_audio.done"]
    assert session.responses[rid].cursor.cutoff_ms == 420


def test_a_noise_held_for_the_page_s_barge_in_resumes_once_the_quiet_follows_it() -> None:
    """The page's VAD fired after the cough and nothing followed (server VAD heard no more):
    the reply resumes on the noise once `RESUME_SILENCE_MS` of quiet followed the input the
    page's `barge_in` arrived with, not before; with reason `noise`, no backchannel event."""
    session, rid, item_id = cough_turn_at_its_gap()
    session.input_turns.audio.append(bytes(2 * 24000 * 300 // 1000))
    send(session, type="barge_in", response_id=rid, audio_end_ms=420, source="vad", pause=True)
    heard_at_barge_in = session.input_turns.audio.end_ms
    decide_on(session, item_id, "")
    session.turn_taking.on_vad_position(HeardSound(heard_at_barge_in + RESUME_SILENCE_MS - 10,
                                                   sound_end_ms=450))
    assert session.take_events() == []
    session.turn_taking.on_vad_position(HeardSound(heard_at_barge_in + RESUME_SILENCE_MS,
                                                   sound_end_ms=450))
    assert [(e["type"], e.get("reason")) for e in session.take_events()] == [
        ("response.resumed", "noise")]


def test_the_page_s_barge_in_on_the_cough_itself_lets_the_noise_resume_at_once() -> None:
    """The page's VAD fired on the cough itself (its `barge_in` arrived before the cough's
    turn went silent): the `noise` verdict resumes the reply at once, as without it."""
    session, rid = paused_session()
    session.take_events()
    cough = speech_fixtures.white_noise_burst(np.random.default_rng(3), 150.0, -20.0)
    session.input_turns.audio.append(mic_pcm16(speech_fixtures.place(cough, 300, 0)))
    item_id = session.input_turns.speech_turn[0]
    send(session, type="barge_in", response_id=rid, audio_end_ms=420, source="vad", pause=True)
    session.input_turns.audio.append(bytes(2 * 24000 * 300 // 1000))
    session.turn_taking.on_speech_gap(450)
    decide_on(session, item_id, "")
    assert [(e["type"], e.get("reason")) for e in session.take_events()] == [
        ("response.resumed", "noise")]
