"""Paused replies: speech over a reply pauses it; the person's utterance then decides.

When either VAD hears speech during a reply (server VAD's `speech_started`, or the client's
`barge_in` with `pause: true`), the reply is *paused*: `response.paused` is announced, nothing
more of it is sent, it stays `in_progress` and the client keeps its unplayed audio. The
utterance decides (`server.listening.backchannel.classify`): a backchannel resumes the reply
where it stopped (`response.resumed`, reason `backchannel`) and never becomes a turn; anything
else cuts it at the paused position (cancelled, `turn_detected`) and is answered as today.

The bounded wait (`InterruptionSettings`), as an explicit rule:

- speech still going `max_backchannel_ms` + `UTTERANCE_TAIL_MS` after it started cannot be a
  backchannel: cut at once (reason `speech_continued`);
- at `pause_timeout_ms` after the pause with no decision: an utterance still in progress or
  awaiting its transcript cuts (reason `timeout`: never resume over words not understood);
  no utterance at all (the client's VAD fired on a cough or a door that server VAD did not take
  for speech, or the utterance had no words) resumes (reason `timeout`).

A backchannel resumes only when the person is done: the verdict, taken at the utterance's
first 150 ms of silence (`DECISION_TAIL_MS`, its transcription running while the silence
accrues), is *held* until `RESUME_SILENCE_MS` of quiet has been heard since the person's sound
ended (`server.listening.quiet_after_speech`: 10 ms level frames, which see the sound's end
and the next word's onset before Silero does), or server VAD ended the turn with nothing heard
since. Speech before then voids it (the same turn goes on, or a new one starts: the whole of
what the person says decides), and sound before then restarts the wait, so "Okay. (420 ms)
Stop." never plays a word of the reply between "Okay" and "Stop". Speech that resumes
a turn whose backchannel (or noise: a cough before the words) already resumed the reply (a
longer pause, or a client's longer
`silence_duration_ms`) pauses the reply again, at once, and the whole turn decides anew: the
reply plays on for at most that pause, and a cut then keeps only what the client played. A
client that stops sending audio after a backchannel gets its reply back at the timeout. The
client's VAD reporting the person (`barge_in` with `pause`) after a `noise` sound ended holds
that verdict like a backchannel's (`ReplyPauses.client_heard`): the person spoke on.

Prior art: LiveKit Agents' `resume_false_interruption` / `false_interruption_timeout`. Sans-I/O:
plain state; `Session` applies it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from server.listening.backchannel import Verdict, classify
from server.listening.pcm16 import pcm16_to_float
from server.listening.quiet_after_speech import HeardSound
from server.listening.server_vad_settings import UTTERANCE_TAIL_MS
from server.realtime.effects import WakeSender
from server.realtime.events import EventLog
from server.realtime.interruption_settings import InterruptionSettings
from server.realtime.pause_timing import PauseTiming
from server.realtime.response_state import ResponseState

if TYPE_CHECKING:
    from server.realtime.input_turns import InputTurns
    from server.realtime.interruptions import Interruptions
    from server.realtime.responses import ResponseLifecycle

RESUME_SILENCE_MS = 450
"""Quiet (ms of input audio) after the end of a backchannel's sound before the reply resumes:
the person is done. A tester's "Okay. Stop." (espeak-ng, a 420 ms sentence pause: about 300 ms
between the sounds) resumed the reply for 0.8 s when it resumed at the decision. Measured
offline (`tests/test_resume_silence.py`, six backchannel-interruption pairs in Piper and six
espeak-ng voices, 42 pairs, the sounds 300-500 ms apart): 450 ms of quiet after the sound's
end resumes before the second word 0 times up to 420 ms apart (11 at 450, all at 500: a
pause that long is a second turn by `silence_duration_ms`'s default, 500 ms), where 500 ms of
server VAD's silence (the rule before) did 14 times at 400 ms and 13 at 420 (a /s/ or /h/ onset
is not speech to Silero for a window or two, and a VAD turn end resumed the reply
regardless); and on `benchmarks/bench_backchannel.py`'s "uh-huh", "mm-hmm", "yeah", "right",
"okay" (Piper and four espeak-ng voices) it resumes 80 ms sooner at the median, 60 ms at the
95th percentile (pause -> resume on the input timeline: 560 / 780 ms against 640 / 840).
The resume's wait is the larger of this and the decision (its transcription and readings
start at `DECISION_TAIL_MS` of silence)."""

ONSET_HOLD_MS = 800
"""How long (ms of input audio) server VAD's turn end keeps a backchannel's reply paused when
the person's sound set in again after a quiet (`HeardSound.onset_ms`) that Silero does not
call speech yet: the new turn then decides. espeak-ng en-us+f3 "stop" after "okay": a /s/,
a 50 ms closure, then the vowel; its turn started 250-400 ms after the sound's onset over the
protocol, after a 300 ms bound had run out and the reply had resumed (1 of 4 runs at load
12). A sound that starts no turn resumes the reply at this bound, or once 450 ms of quiet
followed it (a breath, a door)."""

SOUND_END_LEAD_MS = 64
"""The furthest (ms) the silence may count from before server VAD's speech end: Silero scores
the window of silence right after a word as speech (one 32 ms window) and a 10 ms level frame
can end inside the word's last window; a person whose last syllable falls more than the level
rule's range under their loudest is still speaking while Silero says so."""


class HeldVerdict(NamedTuple):
    """A verdict on the deciding utterance that resumes the reply once the person is done.

    Attributes:
        verdict: `Verdict.BACKCHANNEL`, or `Verdict.NOISE` when the client's VAD heard the
            person after the sound (`Pause.client_heard_ms`).
        transcript: the utterance's transcript (stripped).
        rule: the deciding rule (`server.listening.backchannel.Decision.rule`).
    """

    verdict: Verdict
    transcript: str
    rule: str


@dataclass(slots=True)
class Pause:
    """One paused reply.

    Attributes:
        response_id: the paused response.
        started_ms: session clock (ms) when it paused.
        audio_end_ms: its position (ms of its audio) at the pause.
        reason: "speech_started" (server VAD) or "barge_in" (the client's VAD).
        item_id: the person's input turn deciding it (server VAD), None until one started.
        speech_start_ms: input-timeline start (ms) of that turn's speech.
        transcribing: that turn was committed and waits for its transcript.
        silent_since_ms: input-timeline end (ms) of that turn's speech while it is silent
            (server VAD reported a gap or a pause, no speech since); None while it speaks.
        held: a backchannel verdict (or a `noise` one the client's VAD heard the person after:
            `client_heard_ms`) waiting for `RESUME_SILENCE_MS` of silence, None when none waits.
        hold_until_ms: input position (ms) up to which a held verdict whose turn ended waits
            on an onset (`ONSET_HOLD_MS`), None when none does.
        later_turn: (item id, input start ms) of a turn that started while the deciding one
            was still undecided, None when none did: a backchannel verdict then hands the
            decision to it (the person spoke on).
        client_heard_ms: input-timeline end (ms) of the audio the server held when the
            client's VAD last reported the person (`barge_in` with `pause`, while paused or
            pausing): they were speaking up to about there; None when it never did.
        timing: when things happened, for `response.resumed`'s `timing` (`PauseTiming`).
    """

    response_id: str
    started_ms: float
    audio_end_ms: int
    reason: str
    item_id: str | None = None
    speech_start_ms: int | None = None
    transcribing: bool = False
    silent_since_ms: int | None = None
    held: HeldVerdict | None = None
    hold_until_ms: int | None = None
    later_turn: tuple[str, int] | None = None
    client_heard_ms: int | None = None
    timing: PauseTiming = field(default_factory=PauseTiming)

    def deadline_ms(self, settings: InterruptionSettings) -> float:
        """Session clock (ms) at which the timeout rule applies."""
        return self.started_ms + settings.pause_timeout_ms


class ReplyPauses:
    """The paused reply of one session, and the decisions that end its pause.

    Args:
        responses: the session's responses.
        turns: the session's input turns (the utterance that decides).
        interruptions: the session's interruptions (a cut marks the reply interrupted).
        log: the session's outbox.
        sample_rate_hz: input PCM16 rate.
        settings: the initial rules (`SessionConfig.interruption`).
        clock: the session clock (ms).

    Attributes:
        settings: the rules in force (`session.interruption`).
        current: the pause in progress, None when no reply is paused.
        room_dbfs: server VAD's room background, its loud level (dBFS; None while none was
            learned, or without server VAD): the utterance is measured above it
            (`classify`'s `room_dbfs`).
    """

    def __init__(self, responses: ResponseLifecycle, turns: InputTurns,
                 interruptions: Interruptions, log: EventLog, sample_rate_hz: int,
                 settings: InterruptionSettings, clock: Callable[[], float]) -> None:
        self.settings = settings
        self._clock = clock
        self.current: Pause | None = None
        self.room_dbfs: float | None = None
        self._responses = responses
        self._turns = turns
        self._interruptions = interruptions
        self._log = log
        self._rate = sample_rate_hz
        self._heard = HeardSound(0)
        self._resumed_turn: str | None = None

    def pause(self, response: ResponseState, reason: str, audio_end_ms: int) -> None:
        """Pause `response` at `audio_end_ms` (ms of its audio) now; announce
        `response.paused`. A reply already paused stays paused (its position may only grow:
        the client's own report of where it stopped)."""
        if self.current is not None and self.current.response_id == response.id:
            self.current.audio_end_ms = max(self.current.audio_end_ms, audio_end_ms)
            return
        response.paused = True
        self.current = Pause(response.id, self._clock(), audio_end_ms, reason)
        turn = self._turns.speech_turn
        if turn is not None:
            self.current.item_id, self.current.speech_start_ms = turn
        self._log.emit("response.paused", response_id=response.id, item_id=response.item_id,
                       audio_end_ms=audio_end_ms, reason=reason)
        self._log.effect(WakeSender())

    def client_heard(self, input_end_ms: int) -> None:
        """The client's VAD reported the person (`barge_in` with `pause`) with the input audio
        received up to `input_end_ms` (input-timeline ms): they were speaking then. The quiet
        a held verdict waits for counts from there at the earliest, and a `noise` verdict on
        a sound that ended before it is held like a backchannel (the person spoke on): the
        page's `barge_in` carries no position on the input timeline, and the audio it fired
        on has reached the server by the time it arrives (the page sends the microphone on
        the same socket, in order)."""
        if self.current is not None:
            self.current.client_heard_ms = max(self.current.client_heard_ms or 0, input_end_ms)

    def attach_turn(self, item_id: str, audio_start_ms: int) -> bool:
        """A server VAD turn started: it decides the pause that has none yet. True when it
        does.

        A new turn also decides a pause whose turn's backchannel verdict waits for silence
        (`held`): the person spoke again before they were done, and the new words decide.
        """
        pause = self.current
        if pause is None:
            return False
        if pause.item_id is not None and pause.held is None:
            pause.later_turn = (item_id, audio_start_ms)
            return False
        pause.item_id, pause.speech_start_ms = item_id, audio_start_ms
        pause.held = pause.silent_since_ms = pause.hold_until_ms = pause.later_turn = None
        pause.timing.not_quiet()
        return True

    def silent(self, item_id: str | None, audio_end_ms: int) -> None:
        """Server VAD reported a gap or pause of turn `item_id` after `audio_end_ms` (input
        ms): the deciding turn is silent since then."""
        pause = self.current
        if pause is not None and item_id is not None and pause.item_id == item_id:
            pause.silent_since_ms = audio_end_ms
            self._release_held()

    def spoke_again(self, item_id: str | None) -> bool:
        """Server VAD heard turn `item_id` speak again after a gap or pause. A backchannel
        verdict held for its silence is void (the whole turn decides at its next gap). True
        when that turn's backchannel or noise already resumed the latest reply: the caller
        pauses it again (`pause`), and the turn decides anew."""
        pause = self.current
        if pause is not None and item_id is not None and pause.item_id == item_id:
            pause.silent_since_ms = None
            pause.held = None
            pause.timing.not_quiet()
        again = item_id is not None and pause is None and self._resumed_turn == item_id
        if again:
            self._resumed_turn = None
        return again

    def stopped(self, item_id: str | None) -> None:
        """Server VAD ended turn `item_id` (its `silence_duration_ms`, or `semantic_vad`'s
        verdict): the person is done, and a backchannel held on it resumes the reply now,
        unless the person's sound set in again after its speech (a next word's onset Silero
        does not call speech yet): then for at most `ONSET_HOLD_MS` more, while a new turn
        may start and decide."""
        pause = self.current
        if pause is None or pause.held is None or pause.item_id != item_id:
            return
        onset_ms = max(self._heard.onset_ms or 0, pause.client_heard_ms or 0)
        if pause.silent_since_ms is None or onset_ms < pause.silent_since_ms:
            self._resume_held(pause)
        else:
            pause.hold_until_ms = self._heard.heard_ms + ONSET_HOLD_MS
            self._release_held()

    def heard_until(self, heard: HeardSound) -> None:
        """Server VAD has judged the input up to `heard.heard_ms` (input-timeline ms), and the
        person's sound last ended at `heard.sound_end_ms` (None: unknown; the silence then
        counts from server VAD's speech end): a held backchannel followed by
        `RESUME_SILENCE_MS` of quiet resumes the reply now."""
        self._heard = heard
        if self.current is not None and self.current.timing.heard_at_pause_ms is None:
            self.current.timing.heard_at_pause_ms = heard.heard_ms
        self._release_held()

    def _silence_from(self, pause: Pause) -> int:
        """Input position (ms) from which the silence after the deciding turn's speech counts:
        the end of the person's sound (`SOUND_END_LEAD_MS` before server VAD's speech end at
        the most), or server VAD's speech end when the sound is unknown; never before the
        client's VAD last heard the person (`Pause.client_heard_ms`)."""
        assert pause.silent_since_ms is not None
        since = pause.silent_since_ms
        if self._heard.sound_end_ms is not None:
            since = max(self._heard.sound_end_ms, since - SOUND_END_LEAD_MS)
        return max(since, pause.client_heard_ms or 0)

    def _release_held(self) -> None:
        """Note when the silence after the deciding turn's speech became long enough (the
        person is done), and then resume on a held backchannel."""
        pause = self.current
        if pause is None or pause.silent_since_ms is None:
            return
        heard_ms = self._heard.heard_ms
        if heard_ms - self._silence_from(pause) >= RESUME_SILENCE_MS or (
                pause.hold_until_ms is not None and heard_ms >= pause.hold_until_ms):
            self._quiet(pause)
            if pause.held is not None:
                self._resume_held(pause)

    def _quiet(self, pause: Pause) -> None:
        """Note (`Pause.timing`) that the person is done now, unless noted already."""
        timing = pause.timing
        if timing.quiet_ms is None:
            timing.quiet_ms = self._clock()
            timing.heard_at_quiet_ms = self._heard.heard_ms
            if pause.silent_since_ms is not None:
                timing.silence_from_ms = self._silence_from(pause)

    def _resume_held(self, pause: Pause) -> None:
        """Resume the reply on the held verdict: a backchannel is announced
        (`input_audio_buffer.backchannel`) and resumes with reason `backchannel`, a noise with
        reason `noise`."""
        assert pause.held is not None and pause.item_id is not None
        self._quiet(pause)
        self._resumed_turn = pause.item_id
        verdict, transcript, rule = pause.held
        if verdict is Verdict.NOISE:
            self.resume(verdict.value)
            return
        self._log.emit("input_audio_buffer.backchannel", item_id=pause.item_id,
                       response_id=pause.response_id, transcript=transcript, rule=rule)
        self.resume("backchannel", pause.timing)

    def speech_paused(self, item_id: str | None, audio_end_ms: int) -> None:
        """The deciding turn's speech paused at `audio_end_ms` (input ms): cut when it already
        lasted longer than any backchannel."""
        pause = self.current
        if pause is not None and item_id is not None and pause.item_id == item_id and (
                audio_end_ms - (pause.speech_start_ms or 0) > self.settings.max_backchannel_ms):
            self.cut("speech_continued")

    def appended(self, input_end_ms: int) -> None:
        """Input audio now reaches `input_end_ms`: cut when the deciding turn is still speaking
        (no gap or pause reported since it last spoke) longer than any backchannel plus the
        utterance tail."""
        pause = self.current
        if pause is None or pause.item_id is None or pause.transcribing:
            return
        if self._turns.speaking(pause.item_id) and (
                input_end_ms - (pause.speech_start_ms or 0)
                > self.settings.max_backchannel_ms + UTTERANCE_TAIL_MS):
            self.cut("speech_continued")

    def input_replaced(self, item_id: str | None) -> None:
        """The client changed what decides the pause outside server VAD: it cleared the input
        audio or turned server VAD off (`item_id` None: no utterance decides; the timeout rule
        resumes unless a new server VAD turn attaches), or committed the input itself (turn
        `item_id`: its transcript decides, as a committed server VAD turn's does). A tester's
        clear while paused was cut as `speech_continued`, and a commit of "wait" was
        transcribed and never answered."""
        pause = self.current
        if pause is None:
            return
        pause.item_id, pause.speech_start_ms = item_id, None
        pause.transcribing = item_id is not None

    def asked(self) -> None:
        """The deciding turn's transcription for the decision was asked for now (its gap):
        noted for `response.resumed`'s `timing`."""
        if self.current is not None:
            self.current.timing.asked_ms = self._clock()

    def awaits(self, item_id: str) -> bool:
        """True when the paused reply waits for the words of turn `item_id`."""
        pause = self.current
        return pause is not None and pause.item_id == item_id and not pause.transcribing

    def decide(self, item_id: str, transcript: str, pcm16: bytes) -> Verdict | None:
        """The transcript of the deciding turn's audio up to its speech gap is ready
        (`InputTurns.decide`): resume or cut. The verdict, None when no pause waited for it."""
        if not self.awaits(item_id):
            return None
        return self._decide(item_id, transcript, pcm16)

    def prepared(self, item_id: str, transcript: str) -> None:
        """The transcript of the deciding turn's audio up to its pause is ready: decide."""
        pause = self.current
        pcm16 = self._turns.prepared_audio(item_id)
        if pause is None or pause.item_id != item_id or pcm16 is None or pause.transcribing:
            return
        verdict = self._decide(item_id, transcript, pcm16)
        if verdict is Verdict.BACKCHANNEL:
            self._turns.drop_as_backchannel(item_id)

    def committed(self, item_id: str) -> None:
        """The deciding turn was committed: its transcript decides (`transcribed`)."""
        if self.current is not None and self.current.item_id == item_id:
            self.current.transcribing = True

    def transcribed(self, item_id: str, transcript: str) -> bool:
        """The committed deciding turn's transcript is ready: decide. True when it was a
        backchannel (its user item was deleted: no turn, no response)."""
        pause = self.current
        pcm16 = self._turns.committed_audio(item_id)
        if pause is None or pause.item_id != item_id or pcm16 is None:
            return False
        if self._decide(item_id, transcript, pcm16) is not Verdict.BACKCHANNEL:
            return False
        self._turns.transcripts.withdraw(item_id)
        return True

    def check(self, now_ms: float) -> float | None:
        """Apply the timeout rule at clock `now_ms`; forget a pause whose reply ended by other
        means (a cancel, a truncate). Returns the clock reading (ms) at which to check again,
        None when nothing is paused."""
        pause = self.current
        if pause is None:
            return None
        response = self._responses.by_id.get(pause.response_id)
        if response is None or not response.active:
            self._forget(response)
            return None
        if now_ms < pause.deadline_ms(self.settings):
            return pause.deadline_ms(self.settings)
        if pause.held is not None:
            self._resume_held(pause)
            return None
        undecided = pause.item_id is not None and (
            pause.transcribing or self._turns.speech_turn is not None
            or self._turns.awaits_decision(pause.item_id))
        if undecided:
            self.cut("timeout")
        else:
            self.resume("timeout")
        return None

    def resume(self, reason: str, timing: PauseTiming | None = None) -> None:
        """Resume the paused reply where it stopped: announce `response.resumed` (with
        `audio_end_ms`, the client's reported position: where its playback continues, and the
        wait's `timing` when given: `PauseTiming.as_wire`) and shift its real-time pacing by
        the pause (`ResponseState.resume`)."""
        pause = self.current
        if pause is None:
            return
        response = self._responses.by_id.get(pause.response_id)
        if response is None:  # its item was deleted (`ResponseLifecycle.release`)
            self.current = None
            return
        now_ms = self._clock()
        paused_ms = max(0, round(now_ms - pause.started_ms))
        response.resume(now_ms, paused_ms)
        self.current = None
        extra = {} if timing is None else {"timing": timing.as_wire(pause.started_ms)}
        self._log.emit("response.resumed", response_id=response.id, item_id=response.item_id,
                       audio_end_ms=response.cursor.played_ms, reason=reason,
                       paused_ms=paused_ms, **extra)
        self._log.effect(WakeSender())

    def cut(self, reason: str) -> None:
        """End the pause as a real interruption: cancel the reply (`turn_detected`), tell the
        client to drop its queued audio, and cut the history at the paused position."""
        pause = self.current
        if pause is None:
            return
        response = self._responses.by_id.get(pause.response_id)
        self._forget(response)
        if response is None or not response.active:
            return
        self._log.emit("output_audio_buffer.cleared", response_id=response.id, reason=reason)
        self._responses.cancel_generation(response, "turn_detected")
        self._interruptions.server_cut(response)

    def _forget(self, response: ResponseState | None) -> None:
        if response is not None:
            response.paused = False
        self.current = None

    def _decide(self, item_id: str, transcript: str, pcm16: bytes) -> Verdict:
        """Classify the deciding utterance and resume or cut; returns the verdict."""
        pcm = pcm16_to_float(pcm16)
        decision = classify(transcript, pcm, self._rate, language=self.settings.language,
                            max_ms=self.settings.max_backchannel_ms, room_dbfs=self.room_dbfs)
        pause = self.current
        assert pause is not None
        pause.timing.decided_ms = self._clock()
        response = self._responses.by_id.get(pause.response_id)
        if response is None or not response.active:  # a later turn's answer cancelled it
            self._forget(response)
            return decision.verdict
        if decision.verdict is Verdict.INTERRUPTION:
            self.cut("interruption")
            return decision.verdict
        if decision.verdict is Verdict.NOISE and not (
                pause.client_heard_ms is not None and pause.silent_since_ms is not None
                and pause.client_heard_ms > pause.silent_since_ms):
            # As after a backchannel: the turn speaking on pauses the reply again
            # (`spoke_again`); it played on over the person until the turn ended before.
            self._resumed_turn = item_id
            self.resume(decision.verdict.value)
            return decision.verdict
        pause.held = HeldVerdict(decision.verdict, transcript.strip(), decision.rule)
        turn = self._turns.speech_turn
        if pause.later_turn is not None:  # the person spoke on before this verdict
            later_id = pause.later_turn[0]
            self.attach_turn(*pause.later_turn)
            pause.transcribing = self._turns.committed_audio(later_id) is not None
        elif turn is not None and turn[0] != item_id:
            self.attach_turn(*turn)
        elif turn is None:
            self.stopped(item_id)  # the turn ended: done, unless sound set in since
        else:
            self._release_held()
        return decision.verdict
