"""Log output of the server: plain text lines or one JSON object per line (`--log-format`).

Log lines never carry the conversation: no prompt, reply or transcript text, no audio. The
session a line belongs to is known from `SESSION_ID`, a context variable set for each realtime
session's task (every task it starts inherits it).
"""

from __future__ import annotations

import json
import logging
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import TextIO

SESSION_ID: ContextVar[str | None] = ContextVar("duplex_session_id", default=None)
"""Id of the realtime session the running code serves, None outside one."""

LOG_FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
PROJECT_LOGGERS = ("server", "calibration")
"""The loggers (and their children) of this project's packages: what `--log-level debug`
turns to debug."""


class JsonFormatter(logging.Formatter):
    """Formats a record as one line of JSON: `time` (UTC, ISO 8601 with ms), `level`, `logger`,
    `message`, and `session_id` (when the line belongs to a session) and `exception` (the
    traceback, when there is one)."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as a JSON object on one line (newlines inside values are escaped)."""
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
                    .replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        session_id = getattr(record, "session_id", None) or SESSION_ID.get()
        if session_id is not None:
            line["session_id"] = session_id
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


def configure_logging(level: str, log_format: str = "text",
                      stream: TextIO | None = None) -> logging.Handler:
    """Send log records to `stream` (default stderr) as text lines or JSON lines (`log_format`:
    one of `LOG_FORMATS`): this project's own (`PROJECT_LOGGERS`) from `level` (`debug`,
    `info`, ...), every other library's from `info` or `level`, whichever is higher. Returns
    the handler added to the root logger.

    Other libraries' debug lines quote what they handle: websockets its frames (the
    conversation's text and base64 audio), Piper every sentence it speaks.

    Raises:
        ValueError: an unknown `log_format`.
    """
    if log_format not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {LOG_FORMATS}, got {log_format!r}")
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter() if log_format == "json"
                         else logging.Formatter(TEXT_FORMAT))
    numeric = logging.getLevelNamesMapping()[level.upper()]
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(max(numeric, logging.INFO))
    for name in PROJECT_LOGGERS:
        logging.getLogger(name).setLevel(numeric)
    return handler
