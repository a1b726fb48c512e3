"""Generating one session's replies: one task per response, from its prompt to its last segment.

`Generations` carries out the session's `StartGeneration` and `CancelGeneration` effects. A
reply's task waits for what its prompt needs (the transcripts of committed turns, the heard-text
calibration of earlier replies: `HistoryCalibration.before_prompt`), builds the prompt
(`Generation.build_prompt`), and reads the responder in a task of its own while it speaks the
segments the text yields (`ReplyText`, `server.speaking.Speaker`), each once the reply has room
(`Sender.wait_for_room`): a model's tokens reach the session and the voice as they arrive.
The session's side of it, sans-I/O, is `server.realtime.generation.Generation`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from calibration.history_calibration import HistoryCalibration
from server.realtime.session import Session
from server.reply_text import ReplyText
from server.responders.prompt import Prompt, Responder, ResponderError
from server.responders.tools import ToolCall
from server.sending import Sender
from server.speaking import Speaker
from server.turn_work import TurnWork

log = logging.getLogger(__name__)


class Generations:
    """The reply tasks of one session.

    Args:
        session: the session whose responses are generated.
        responder: the reply generator (`Services.responder`).
        calibration: the session's heard-text calibration, or None (`--calibration off`).
        turns: the work on the person's turns (a prompt waits for their transcripts).
        speaker: voices each segment.
        sender: settles when a reply's task ends; its room bounds synthesis ahead of sending.
    """

    def __init__(self, session: Session, responder: Responder,
                 calibration: HistoryCalibration | None, turns: TurnWork, speaker: Speaker,
                 sender: Sender) -> None:
        self.session = session
        self.responder = responder
        self.calibration = calibration
        self._turns = turns
        self._speaker = speaker
        self._sender = sender
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._readers: dict[str, asyncio.Task[bool]] = {}
        self._running: set[asyncio.Task[None]] = set()
        self._stopped_readers: set[asyncio.Task[bool]] = set()

    def start(self, response_id: str) -> None:
        """Start the reply's task (`StartGeneration`)."""
        task = asyncio.create_task(self._generate(response_id))
        self._tasks[response_id] = task
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    def cancel(self, response_id: str) -> None:
        """Stop the reply (`CancelGeneration`: barge-in, cancel, disconnect): its reader first
        (which closes the responder's stream), then its task, unless that task is the caller."""
        self._stop_reader(response_id)
        task = self._tasks.pop(response_id, None)
        if task is not None and task is not asyncio.current_task():
            task.cancel()

    def stop(self) -> list[asyncio.Future[Any]]:
        """Cancel every reply task and reader still running, those cancelled before included
        (at the connection's end); returns them all, for the caller to wait for."""
        for response_id in list(self._readers):
            self._stop_reader(response_id)
        for task in self._running:
            task.cancel()
        return [*self._running, *self._stopped_readers]

    async def _generate(self, response_id: str) -> None:
        """Write one reply: wait for the transcripts and calibration the prompt needs, then
        read the responder in its own task (`_read_reply`) while this one speaks the segments
        it finds, so a model's tokens reach the session and the segmenter as they arrive.

        A failed responder ends the response as `failed` with an `error` event (a
        `ResponderError`'s message, else the exception's type); the reply's heard text stays
        in history. Cancelling this task (barge-in, cancel, disconnect: `cancel` cancels the
        reader first) closes the responder's stream.
        """
        session = self.session
        try:
            await self._turns.transcripts()
            if self.calibration is not None:
                await self.calibration.before_prompt()
            prompt = session.generation.build_prompt(response_id)
            if prompt is None:
                return
            reply = ReplyText()
            reader = asyncio.create_task(self._read_reply(response_id, prompt, reply))
            self._readers[response_id] = reader
            try:
                while (span := await reply.next_span()) is not None:
                    if reader.done() and not reader.cancelled():
                        reader.result()
                    await self._sender.wait_for_room(response_id)
                    if not await self._speaker.speak(response_id, span):
                        return
                if reader.cancelled() or not await reader:
                    return
            finally:
                if self._readers.get(response_id) is reader:
                    self._stop_reader(response_id)
                if reader.done() and not reader.cancelled():
                    reader.exception()
            session.generation.on_done(response_id)
        except asyncio.CancelledError:
            raise
        except ResponderError as exc:
            log.warning("%s: the responder failed: %s", response_id, exc)
            session.generation.on_failed(response_id, str(exc))
        except Exception as exc:
            log.exception("generation failed for %s", response_id)
            session.generation.on_failed(response_id, f"{type(exc).__name__} during generation")
        finally:
            if self._tasks.get(response_id) is asyncio.current_task():
                del self._tasks[response_id]
        await self._sender.settle()

    async def _read_reply(self, response_id: str, prompt: Prompt, reply: ReplyText) -> bool:
        """Feed the responder's deltas, with their Unicode repaired, to the session as they
        arrive and queue the segments for speaking (`ReplyText`); the queue is closed on every
        exit, also when the responder fails or this task is cancelled. The responder's
        iterator is closed on every exit (`contextlib.aclosing`), which closes a model's HTTP
        stream.

        A function call the responder makes goes to the session (`on_function_call`).
        Returns True when the reply was read to its end, False when the response stopped
        generating first. Raises what the responder raises.
        """
        try:
            async with contextlib.aclosing(self.responder.respond(prompt)) as deltas:
                async for delta in deltas:
                    if isinstance(delta, ToolCall):
                        self.session.generation.on_function_call(response_id, delta)
                        continue
                    text = reply.add(delta)
                    if text and not self.session.generation.on_text(response_id, text):
                        return False
            text = reply.end()
            return not text or self.session.generation.on_text(response_id, text)
        finally:
            reply.close()

    def _stop_reader(self, response_id: str) -> None:
        """Cancel the reply's reader task (`_read_reply`), exactly once: whoever takes it out
        of `_readers` cancels it; the connection waits for the stopped readers at the end.

        Never twice: a second cancel that lands while the first one's cleanup awaits aborts
        that cleanup, and httpcore's close of an unfinished response yields once (its
        connection lock's checkpoint) before it closes the socket, so the HTTP connection
        stayed open, counted as busy in the pool, and the LLM server wrote on to the end of the
        reply (a disconnect cancelled the reader, then the generation task's cleanup cancelled
        it again)."""
        reader = self._readers.pop(response_id, None)
        if reader is None:
            return
        reader.cancel()
        self._stopped_readers.add(reader)
        reader.add_done_callback(self._stopped_readers.discard)
