"""Property tests: history never holds more than the listener heard, whatever the event order.

A hypothesis state machine drives a real `Session` wired to a real `HistoryCalibration` (as
`server.connection` wires them) with random sequences of: new replies, prompts (`await
before_prompt()` then `build_prompt`), generation text / audio / done, cancels, ACKs (any
value: beyond the audio sent, decreasing, with `truncate`), `conversation.item.truncate`,
`barge_in`, `output_audio_buffer.clear`, item deletes, and letting calibration tasks finish.

Replies are "w0 w1 … wN-1" under the uniform timing rule (contracts.md): word i is marked
[400 i, 400 (i + 1)] ms, so the exact heard text at a cutoff c is the first min(spoken, c // 400)
words. The policy is the exact `marks_policy()`; the slow variant holds every result behind a
gate released later, ignoring cancellation, so stale results arrive after newer evidence.

The test keeps its own model of each reply's cursor (sent audio from the deltas, the monotonic
commit, the tightening cap, clamping to the audio sent) and checks after every step:
(i) each assistant item's stored text is a word prefix of the reply whose words all end at or
    before the model cutoff min(committed, total audio, cap); so do the prompts' assistant turns
    and every `conversation.item.heard` event (checked against the model when it was emitted:
    a later, stricter cap does not make an earlier announcement wrong);
(ii) once a completely generated reply was ACKed to its end (no earlier cap below its end), its
    stored text is the full text for as long as the item exists (a later truncate must not
    remove text the listener confirmed hearing);
(iii) no calibration result is applied that claims more than the marks give for the cutoff at
    the moment it lands (a result computed for evidence A never lands after the cutoff was
    tightened below A);
and, when a prompt is built, that each ended, retained, partially heard reply holds exactly the
marks text for its current cutoff (the prompt sees what was heard, not an older guess).

Prompts happen as in `server.generation`: the latest reply, before it generates anything, waits
for calibration (`before_prompt`; events and results may come in meanwhile) and builds its
prompt in the same loop step as the wait ends. The model is updated in the same loop step as the
session takes each event, so no task on the loop sees one ahead of the other, and the events
emitted so far are taken and checked before each change of the model.

The model and the plumbing: tests/history_model.py; the sequences the randomized runs found,
kept as examples: tests/test_history_found_sequences.py.
"""

from __future__ import annotations

from collections.abc import Callable
from random import Random
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import invariant, precondition, rule

from calibration.word_marks import WordMark
from server.realtime.effects import StartGeneration
from tests.history_model import MAX_WORDS, VALUE, WORD_MS, HistoryHarness, Reply, check_heard, pcm16


class HistoryMachine(HistoryHarness):
    """Random duplex sessions over a real Session + HistoryCalibration with the marks policy."""

    @precondition(lambda self: self.pending is None
                  and not any(r.active for r in self.session.responses.values()))
    @rule(words=st.integers(1, MAX_WORDS), prompt_now=st.booleans(),
          spoken=st.integers(0, MAX_WORDS), finish=st.booleans())
    def new_reply(self, words: int, prompt_now: bool, spoken: int, finish: bool) -> None:
        """A user turn and `response.create`; with `prompt_now`, the prompt is prepared at once
        and `spoken` words are generated (the generation ends when `finish` and all were)."""
        self._send({"type": "conversation.item.create",
                    "item": {"type": "message", "role": "user",
                             "content": [{"type": "input_text", "text": "go on"}]}})

        def created() -> None:
            (start,) = [e for e in self.session.take_effects() if isinstance(e, StartGeneration)]
            rid = start.response_id
            item_id = self.session.responses[rid].item_id
            self.replies[rid] = Reply(rid, item_id, [f"w{i}" for i in range(words)])
            self.order.append(rid)

        assert self._send({"type": "response.create"}, created)
        reply = self.replies[self.order[-1]]
        if prompt_now:
            self.start_prompt()
            self.finish_prompt(Random(0))
            self._generate(reply, spoken, 0, finish)

    @precondition(lambda self: self.pending is None and self._awaiting_prompt() is not None)
    @rule()
    def start_prompt(self) -> None:
        """The latest reply's generation starts: it waits for calibration (client events and
        calibration results may come in during the wait), then builds its prompt."""
        reply = self._awaiting_prompt()
        assert reply is not None
        self.pending = self._call(lambda: self.loop.create_task(self._prompt(reply)))

    async def _prompt(self, reply: Reply) -> None:
        """`server.generation`'s reply task up to the prompt: `await before_prompt()`, then
        `build_prompt` at once, in the same loop step (no client event comes in between).

        Checks, at that moment, that every ended, retained, partially heard reply holds exactly
        the marks text for its cutoff and that the prompt's turns are the history's (violations
        are recorded: this runs as a task on the loop).
        """
        await self.controller.before_prompt()
        reply.prompted = True
        try:
            self._check_exact()
            prompt = self.session.generation.build_prompt(reply.rid)
            if prompt is None:
                return
            self.prompts[reply.rid] = prompt
            # An assistant item with no text at all said nothing: the prompt leaves it out.
            before = [item for item in self.session.history.before(reply.item_id)
                      if item.role == "user" or item.text.strip() or item.full_text.strip()]
            assert len(before) == len(prompt.turns)
            for item, turn in zip(before, prompt.turns, strict=True):
                assert (turn.role, turn.text) == (item.role, item.text)
                if item.role == "assistant":
                    assert item.response_id is not None
                    check_heard(self.replies[item.response_id], turn.text, "prompt turn")
        except AssertionError as exc:
            self.violations.append(f"prompt of {reply.rid}: {exc}")

    @precondition(lambda self: self.pending is not None)
    @rule(order=st.randoms(use_true_random=False))
    def finish_prompt(self, order: Random) -> None:
        """Release held calibration results (in random order) until the prompt is built."""
        task = self.pending
        assert task is not None
        for _ in range(10_000):
            if task.done():
                break
            open_gates = [gate for gate in self.gates if not gate.is_set()]
            if open_gates:
                order.choice(open_gates).set()
            self._spin(1)
        assert task.done(), "before_prompt never finished although every result was released"
        task.result()
        self.pending = None
        self._take()

    # ------------------------------------------------------------------ rules: generation

    @precondition(lambda self: self._generating() is not None)
    @rule(count=st.integers(0, 3), text_ahead=st.integers(0, 2), finish=st.booleans())
    def generate(self, count: int, text_ahead: int, finish: bool) -> None:
        """Speak `count` more words (text, then their audio with marks), let the text run
        `text_ahead` words ahead of the audio, and end the generation when `finish` and every
        word was spoken."""
        reply = self._generating()
        assert reply is not None
        self._generate(reply, count, text_ahead, finish)

    def _generate(self, reply: Reply, count: int, text_ahead: int, finish: bool) -> None:
        spoken = min(len(reply.words), reply.audio_words + count)
        self._emit_text(reply, min(len(reply.words), max(reply.text_words, spoken + text_ahead)))
        if spoken > reply.audio_words:
            self._emit_audio(reply, spoken)
        if finish and reply.audio_words == len(reply.words):
            def done() -> None:
                self.session.generation.on_done(reply.rid)
                reply.done = reply.ended = True

            self._call(done)
        self._pump()

    def _emit_text(self, reply: Reply, last: int) -> None:
        first = reply.text_words
        if last <= first:
            return
        delta = (" " if first else "") + " ".join(reply.words[first:last])

        def text() -> None:
            assert self.session.generation.on_text(reply.rid, delta)
            reply.text_words = last

        self._call(text)

    def _emit_audio(self, reply: Reply, last: int) -> None:
        first = reply.audio_words
        marks = [
            WordMark(*reply.spans[index], (index - first) * WORD_MS,
                     (index - first + 1) * WORD_MS)
            for index in range(first, last)
        ]
        pcm = pcm16((last - first) * WORD_MS)
        text_end = reply.spans[last - 1][1]

        def speech() -> None:
            assert self.session.generation.on_speech(reply.rid, text_end, pcm, marks)
            reply.audio_words = last

        self._call(speech)

    # ------------------------------------------------------------------ rules: client events

    @precondition(lambda self: self.order)
    @rule(index=st.integers(0, 99), value=VALUE, truncate=st.booleans(), by_item=st.booleans())
    def ack(self, index: int, value: int | str, truncate: bool, by_item: bool) -> None:
        self._send(*self.ack_event(index, value, truncate, by_item))
        self._pump()

    def ack_event(self, index: int, value: int | str, truncate: bool,
                  by_item: bool) -> tuple[dict[str, Any], Callable[[], None]]:
        """The `playback.ack` of the `ack` rule and its model update, for `_send`/`_deliver`."""
        reply = self._pick(index)
        position = reply.position(value)
        target = {"item_id": reply.item_id} if by_item else {"response_id": reply.rid}
        extra = {"truncate": True} if truncate else {}

        def acknowledged() -> None:
            reply.ack(position)
            if truncate:
                reply.cap(position)

        return {"type": "playback.ack", "played_ms": position, **target, **extra}, acknowledged

    @precondition(lambda self: self.order)
    @rule(kind=st.sampled_from(["truncate", "truncate", "barge_in", "barge_in", "clear",
                                "clear_latest", "cancel", "delete"]),
          index=st.integers(0, 99), value=VALUE)
    def interrupt(self, kind: str, index: int, value: int | str) -> None:
        """One interruption-type client event naming a reply (the latest for "clear_latest")."""
        reply = self.replies[self.order[-1]] if kind == "clear_latest" else self._pick(index)
        position = reply.position(value)
        if kind == "truncate":
            position %= reply.total_ms + 1
        interrupts = not reply.fully_played

        def end() -> None:
            reply.ended = True

        def capped_end() -> None:
            if interrupts:
                reply.ended = True
                reply.cap(position)

        def cleared() -> None:
            if reply.rid == self.order[-1] and interrupts:
                reply.ended = True

        def deleted() -> None:
            reply.deleted = reply.ended = True

        match kind:
            case "truncate":
                self._send({"type": "conversation.item.truncate", "item_id": reply.item_id,
                            "content_index": 0, "audio_end_ms": position}, capped_end)
            case "barge_in":
                self._send({"type": "barge_in", "response_id": reply.rid,
                            "audio_end_ms": position,
                            "source": "vad" if index % 2 else "button"}, capped_end)
            case "clear" | "clear_latest":
                named = {} if kind == "clear_latest" else {"response_id": reply.rid}
                self._send({"type": "output_audio_buffer.clear", **named}, cleared)
            case "cancel":
                self._send({"type": "response.cancel", "response_id": reply.rid}, end)
            case "delete":
                self._send({"type": "conversation.item.delete", "item_id": reply.item_id},
                           deleted)
        self._pump()

    # ------------------------------------------------------------------ rules: calibration

    @rule()
    def let_calibrations_finish(self) -> None:
        self._spin(5)
        self._take()

    @precondition(lambda self: any(not gate.is_set() for gate in self.gates))
    @rule(index=st.integers(0, 99))
    def release_one_result(self, index: int) -> None:
        open_gates = [gate for gate in self.gates if not gate.is_set()]
        open_gates[index % len(open_gates)].set()
        self._spin(3)
        self._take()

    # ------------------------------------------------------------------ invariants

    @invariant()
    def history_holds_only_heard_text(self) -> None:
        for reply in self.replies.values():
            item = self.session.history.get(reply.item_id)
            if reply.deleted:
                assert item is None
                continue
            assert item is not None
            assert item.full_text == reply.text_of(reply.text_words)
            check_heard(reply, item.text, f"history of {reply.rid}")
            if reply.confirmed:
                assert item.text == reply.full_text, (
                    f"{reply.rid}: the listener confirmed hearing all of {reply.full_text!r}, "
                    f"but history now holds {item.text!r}"
                )
                continue
            cursor = self.session.responses[reply.rid].cursor
            assert cursor.cutoff_ms == reply.cutoff_ms
            assert self.session.responses[reply.rid].generation_ended == reply.ended

    @invariant()
    def announced_text_is_heard_text(self) -> None:
        """(i) for the `conversation.item.heard` events emitted since the last check."""
        self._take()

    @invariant()
    def no_violation_recorded(self) -> None:
        """(iii) and the prompt checks, recorded by callbacks and tasks on the loop."""
        assert self.violations == []


class SlowHistoryMachine(HistoryMachine):
    """The same sessions with a slow policy: results land late, after newer evidence."""

    SLOW = True


SETTINGS = settings(max_examples=max(200, settings.default.max_examples), stateful_step_count=50,
                    deadline=None, suppress_health_check=[HealthCheck.too_slow])
"""At least 200 sessions per machine; more under a profile that asks for more (`make
fuzz-properties`, tests/conftest.py)."""

TestHistoryWithMarks = HistoryMachine.TestCase
TestHistoryWithMarks.settings = SETTINGS
TestHistoryWithSlowResults = SlowHistoryMachine.TestCase
TestHistoryWithSlowResults.settings = SETTINGS
