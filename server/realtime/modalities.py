"""A reply's output modality, OpenAI's `output_modalities`: `["audio"]` (speech, with its
transcript) or `["text"]` (text only: no speech is synthesized and no audio is sent).

OpenAI's GA events differ by modality (the `openai` package's server events): an audio reply's
content part is `{"type": "audio", "transcript"}`, its text comes in
`response.output_audio_transcript.delta` / `.done` and it ends with `response.output_audio.done`;
a text reply's part is `{"type": "text", "text"}`, its text comes in `response.output_text.delta`
/ `.done`, and its item's content is `output_text`. This module says which, once. A text reply
is read, not played: the text sent is what its reader has (its history text, whether it
completed or was cancelled). Sans-I/O.
"""

from __future__ import annotations

from typing import Any

AUDIO = ("audio",)
TEXT = ("text",)


def parse_modalities(value: Any) -> tuple[str, ...]:
    """`output_modalities` (already valid for OpenAI's schema: a list of "audio" / "text") as
    AUDIO or TEXT: text only when "audio" is not asked for.

    Raises:
        ValueError: an empty list.
    """
    if not value:
        raise ValueError("output_modalities must name 'audio' or 'text'.")
    return AUDIO if "audio" in value else TEXT


def delta_event(modalities: tuple[str, ...]) -> str:
    """The event type carrying a reply's text as it is sent."""
    return "response.output_text.delta" if modalities == TEXT else (
        "response.output_audio_transcript.delta")


def content_type(modalities: tuple[str, ...]) -> str:
    """The assistant item's content type (`HistoryItem.content_type`)."""
    return "output_text" if modalities == TEXT else "output_audio"


def part(modalities: tuple[str, ...], text: str) -> dict[str, str]:
    """The content part of `response.content_part.added` / `.done` holding `text`."""
    return {"type": "text", "text": text} if modalities == TEXT else {
        "type": "audio", "transcript": text}


def done_events(modalities: tuple[str, ...], text: str) -> list[tuple[str, dict[str, Any]]]:
    """The (type, fields) of the events ending a reply's content, before
    `response.content_part.done`: the text's `.done` (and for audio `output_audio.done`)."""
    if modalities == TEXT:
        return [("response.output_text.done", {"text": text})]
    return [("response.output_audio.done", {}),
            ("response.output_audio_transcript.done", {"transcript": text})]
