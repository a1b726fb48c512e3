"""The responder's side of each response: the prompt it is given, and the text, speech and
function calls it produces.

The asyncio layer asks `Generation.build_prompt` for a started response's prompt (the history
before its item, as heard), then feeds back what the responder and the TTS produce:
`on_text`, `on_speech` (a synthesized chunk with its word marks, recorded for calibration
too), `on_function_call`, and at the end `on_done` or `on_failed`. Output of a response that
no longer generates (cancelled, ended, unknown) is dropped. Sending the queued output is the
session's pacing (`Session.pull_outbound`). Sans-I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from calibration.word_marks import WordMark
from server.listening.pcm16 import pcm16_to_float
from server.realtime.effects import WakeSender
from server.realtime.events import EventLog
from server.realtime.history import ConversationHistory, HistoryItem
from server.realtime.interruptions import Interruptions
from server.realtime.prompt_turns import conversation_turns
from server.realtime.responses import ResponseLifecycle
from server.realtime.session_settings import SessionSettings
from server.responders.prompt import Prompt
from server.responders.tools import ToolCall, chat_tool_choice, chat_tools

if TYPE_CHECKING:
    from calibration.history_calibration import HistoryCalibration


class Generation:
    """Prompts in and generated output back for one session's responses.

    Args:
        responses: the session's responses.
        history: the session's conversation.
        settings: the session's client-visible settings (instructions, stored `tools`,
            `tool_choice` and `max_output_tokens`).
        interruptions: the session's interruption rules (a failed reply is marked
            interrupted).
        log: the session's outbox.
        calibration: the session's calibration controller, None without one.
        sample_rate_hz: output PCM16 rate (Hz).
        frame_ms: audio per `response.output_audio.delta` (ms).
        interruption_note: template told to the responder after an interrupted turn.
    """

    def __init__(self, responses: ResponseLifecycle, history: ConversationHistory,
                 settings: SessionSettings, interruptions: Interruptions, log: EventLog,
                 calibration: Callable[[], HistoryCalibration | None], *, sample_rate_hz: int,
                 frame_ms: int, interruption_note: str) -> None:
        self._responses = responses
        self._history = history
        self._settings = settings
        self._interruptions = interruptions
        self._log = log
        self._calibration = calibration
        self._rate = sample_rate_hz
        self._frame_ms = frame_ms
        self._interruption_note = interruption_note

    def build_prompt(self, response_id: str) -> Prompt | None:
        """The responder's prompt for `response_id`: history before its item, as heard.

        Returns None when the response is no longer active (it was cancelled while waiting).
        The turns are `prompt_turns.conversation_turns`'; the function `tools` and
        `tool_choice` (`response.create`'s, else the session's) are offered in the
        chat-completions shape.
        """
        response = self._responses.by_id.get(response_id)
        if response is None or not response.active:
            return None
        before = self._history.before(response.item_id)
        response.prompted_items = frozenset(item.id for item in before if item.text)
        stored = self._settings.stored
        return Prompt(
            instructions=self._responses.instructions(response_id, self._settings.instructions),
            turns=conversation_turns(before, self.failed),
            interruption_note=self._interruption_note,
            max_output_tokens=None if stored["max_output_tokens"] == "inf"
            else stored["max_output_tokens"],
            tools=tuple(chat_tools(stored["tools"] if response.tools is None
                                   else response.tools)),
            tool_choice=chat_tool_choice(stored["tool_choice"] if response.tool_choice is None
                                         else response.tool_choice),
        )

    def failed(self, item: HistoryItem) -> bool:
        """Whether the response that wrote assistant `item` failed."""
        response = self._responses.by_id.get(item.response_id or "")
        return response is not None and response.status == "failed"

    def on_text(self, response_id: str, delta: str) -> bool:
        """Append responder text to the reply; False when the response no longer generates."""
        response = self._responses.generating(response_id)
        if response is None:
            return False
        response.text += delta
        item = self._history.get(response.item_id)
        if item is not None:
            item.full_text = response.text
        return True

    def on_function_call(self, response_id: str, call: ToolCall) -> bool:
        """Keep a function call of the reply (sent as a `function_call` item when the response
        completes); False when the response no longer generates."""
        response = self._responses.generating(response_id)
        if response is not None:
            response.function_calls.append(call)
        return response is not None

    def on_speech(
        self, response_id: str, text_end: int, pcm16: bytes, marks: list[WordMark]
    ) -> bool:
        """Queue the transcript up to `text_end` and one synthesized chunk of audio.

        Args:
            response_id: the response the chunk belongs to.
            text_end: code-point end (in the reply text) of the segment this chunk speaks.
            pcm16: PCM16 LE mono at the session's output rate (may be empty).
            marks: the chunk's word marks relative to the chunk start and to the reply text's
                start (char offsets already shifted by the segment's start).

        Returns:
            False (and nothing is queued) when the response was cancelled, ended or is unknown:
            late output of a cancelled response is dropped.
        """
        response = self._responses.generating(response_id)
        if response is None:
            return False
        response.queue_text(text_end)
        if pcm16:
            placed = response.queue_speech(pcm16, marks, self._rate, self._frame_ms)
            if (calibration := self._calibration()) is not None:
                pcm_f32 = _pcm16_to_f32le(pcm16) if calibration.requires_audio else b""
                calibration.record(response.id, {
                    "pcm_f32le": pcm_f32, "sample_rate_hz": self._rate, "marks": placed,
                })
        self._log.effect(WakeSender())
        return True

    def on_done(self, response_id: str) -> None:
        """The responder and TTS finished the whole reply: the audio is complete."""
        response = self._responses.generating(response_id)
        if response is None:
            return
        response.queue_text(len(response.text))
        response.generation_ended = True
        response.cursor.audio_complete = True
        self._log.effect(WakeSender())

    def on_failed(self, response_id: str, message: str) -> None:
        """Generation raised: end the response as failed (an `error`, `generation_failed`,
        with `message`); history keeps what was heard."""
        response = self._responses.generating(response_id)
        if response is None:
            return
        response.generation_ended = True
        response.queue.clear()
        response.error_message = message
        self._log.emit("error", error={"type": "server_error", "code": "generation_failed",
                                       "message": message, "param": None, "event_id": None})
        self._responses.finish(response, "failed", None)
        self._interruptions.mark_interrupted(response)


def _pcm16_to_f32le(pcm16: bytes) -> bytes:
    """PCM16 LE bytes -> float32 LE bytes in [-1, 1)."""
    return pcm16_to_float(pcm16).astype("<f4", copy=False).tobytes()
