"""The per-socket asyncio driver: one `Connection` per WebSocket, coordinating its parts.

A connection feeds one sans-I/O `Session` and carries out the effects it asks for, through
parts that each do one job:

- `server.receiving.Receiver`: client frames in arrival order, within the session's limits;
- `server.sending.Sender`: server events out in order, audio paced in real time (the send
  loop), and the lead of synthesis over sending;
- `server.generation.Generations`: one task per reply (prompt, responder, segments), voiced by
  `server.speaking.Speaker` in turns at the shared TTS;
- `server.turn_work.TurnWork`: the work on the person's turns (server VAD on the input lane of
  `server.input_work.SessionInput`, transcripts, the end-of-turn model).

The connection itself opens the session, routes each effect to its part, relays the heard-text
calibration's results, winds a dropped session down before it is parked, and at the end cancels
every task its parts started.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from calibration.history_calibration import HistoryCalibration
from server.generation import Generations
from server.input_work import SessionInput
from server.realtime.drop import cut_at_drop
from server.realtime.effects import CancelGeneration, Effect, StartGeneration, WakeSender
from server.realtime.session import Session
from server.receiving import Receiver
from server.sending import Sender, now_ms
from server.services import NoObserver, Services, SessionObserver
from server.speaking import Speaker
from server.turn_work import TurnWork

WIND_DOWN_TIMEOUT_S = 5.0
"""Longest wait (s) for the transcripts of committed turns when a dropped session is parked
(faster-whisper tiny.en takes well under a second for a turn on 2 cores); a later one is
lost with the connection's tasks."""


class Connection:
    """Drive one session over one WebSocket.

    Args:
        websocket: the accepted `websockets` server connection.
        services: shared TTS, responder and calibration settings.
        session_id: id for the new session.
        observer: told of every applied client event and every server event (metrics).
        session: a parked session to serve again (a resume), else a new one is made.

    Attributes:
        opening: keyword arguments of `Session.open` (the resume token, `session.resumed`).
        keep: asked when the connection ended whether the session will be parked
            (`server.resumption`); if so, `run` first applies the drop to it
            (`_wind_down`).
        sender, receiver, turns, speaker, generations: the parts (module docstring).
    """

    def __init__(self, websocket: ServerConnection, services: Services, session_id: str,
                 observer: SessionObserver | None = None,
                 session: Session | None = None) -> None:
        self.websocket = websocket
        self.observer = observer or NoObserver()
        self.services = services
        self.session = session or Session(services.session_config, session_id=session_id)
        self.opening: dict[str, Any] = {}
        self.keep: Callable[[], bool] | None = None
        self.calibration: HistoryCalibration | None = None
        if services.policy is not None:
            self.calibration = HistoryCalibration(
                self.session.heard_text, services.policy,
                max_bytes=services.history_audio_max_bytes,
                timeout_s=services.calibration_timeout_s,
                on_applied=self._on_calibrated,
                on_failed=self._on_calibration_failed,
            )
            self.session.calibration = self.calibration
        self._background: set[asyncio.Future[None]] = set()
        session_input = SessionInput(self.session, services.input_speed,
                                     services.input_window_s)
        self.sender = Sender(self.session, websocket, self.observer, services.send_timeout_s,
                             self._carry_out_effects)
        self.speaker = Speaker(self.session, services, self.sender)
        self.receiver = Receiver(self.session, websocket, services, self.observer, self.sender,
                                 session_input, self.speaker.latest_echo)
        self.turns = TurnWork(self.session, services.input_transcriber, session_input,
                              self.sender)
        self.generations = Generations(self.session, services.responder, self.calibration,
                                       self.turns, self.speaker, self.sender)

    async def run(self) -> None:
        """Serve the session until the socket closes; then cancel everything it started."""
        self.session.open(**self.opening)
        sending = asyncio.create_task(self.sender.run())
        try:
            await self.sender.settle()
            await self.receiver.run()
        except ConnectionClosed:
            pass
        finally:
            self.receiver.close()
            if self.keep is not None and self.keep():
                await self._wind_down()
            tasks = [sending, *self._background, *self.turns.tasks()]
            self.session.close()
            self._carry_out_effects()
            for task in tasks:
                task.cancel()
            try:
                await asyncio.gather(*tasks, *self.generations.stop(), return_exceptions=True)
            finally:
                self.sender.close()

    async def _wind_down(self) -> None:
        """Before the session is parked: cut the reply at the drop (`drop.cut_at_drop`), let
        the committed turns' transcripts and the cut's calibration finish (each within its
        own bound: `WIND_DOWN_TIMEOUT_S`, `calibration_timeout_s`), and hand the events meant
        for the gone client to the observer only."""
        self.session.set_clock(now_ms())
        if (drop := cut_at_drop(self.session)) is not None:
            self.observer.client_event(drop)
        self._carry_out_effects()
        if self.turns.transcribing:
            await self.turns.transcripts(WIND_DOWN_TIMEOUT_S)
            self.session.set_clock(now_ms())
            if (drop := cut_at_drop(self.session)) is not None:  # a transcript started one
                self.observer.client_event(drop)
            self._carry_out_effects()
        if self.calibration is not None:
            await self.calibration.before_prompt()
        self._carry_out_effects()
        for event in self.session.take_events():
            self.observer.server_event(event)

    def _carry_out_effects(self) -> None:
        """Route each effect the session asks for to the part that carries it out."""
        while effects := self.session.take_effects():
            for effect in effects:
                self._route(effect)

    def _route(self, effect: Effect) -> None:
        match effect:
            case StartGeneration(response_id=response_id):
                self.generations.start(response_id)
            case CancelGeneration(response_id=response_id):
                self.generations.cancel(response_id)
            case WakeSender():
                self.sender.pull_soon()
            case _:
                self.turns.apply(effect)

    def _on_calibrated(self, response_id: str, result: int, elapsed_ms: float) -> None:
        """A calibration was applied: announce it, and its ASR cross-check once that ends."""
        self.session.heard_text.announce_calibration(response_id, elapsed_ms)
        cross_check = getattr(result, "cross_check", None)
        if cross_check is not None:
            task = asyncio.ensure_future(self._report_cross_check(response_id, result,
                                                                  cross_check))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        self.sender.wake()

    def _on_calibration_failed(self, response_id: str, elapsed_ms: float) -> None:
        """A calibration ended without a result: announce the text kept without it."""
        self.session.heard_text.announce_calibration(response_id, elapsed_ms)
        self.sender.wake()

    async def _report_cross_check(
        self, response_id: str, result: int,
        cross_check: Awaitable[tuple[str | None, bool | None]],
    ) -> None:
        """Wait for a marks result's ASR cross-check, then let the session announce it."""
        asr_text, marks_agree = await cross_check
        self.session.heard_text.report_cross_check(response_id, result, asr_text, marks_agree)
        self.sender.wake()
