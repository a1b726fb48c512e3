"""A responder backed by any OpenAI-compatible chat-completions server, streaming.

`LLMResponder` sends `Prompt.as_messages()` (the instructions, the history as heard with a note
after each interrupted turn, the new user turn) to `POST {url}/chat/completions` with
`stream: true` through the `openai` package's `AsyncOpenAI`, and yields each content delta as it
arrives, without reasoning: `reasoning_content` deltas are not read, and `<think>` spans in the
content are cut out (`server.responders.reasoning`). Works with vLLM, llama.cpp's server (and
llama-cpp-python's), Ollama's `/v1` and hosted APIs.

Closing the generator (`aclose`, or cancelling the task iterating it) closes the HTTP response
at once; an unfinished response's connection is then dropped, not returned to the pool, so the
LLM server sees the client disconnect and can stop generating.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import httpx
import openai

from server.responders.prompt import Prompt, ResponderError
from server.responders.reasoning import ReasoningFilter

ERROR_DETAIL_CHARS = 200
"""Longest piece of an LLM server's own error message quoted in a `ResponderError` (code
points): enough for "model 'x' not found", short enough for an error event."""


@dataclass(frozen=True, slots=True)
class LLMSettings:
    """Where and how to ask the model.

    Attributes:
        url: base URL of the OpenAI-compatible API, the part before `/chat/completions`
            (e.g. "http://127.0.0.1:8080/v1").
        model: model name sent in each request (what the server serves, e.g. "llama3.2").
        api_key: bearer token, or None for servers that need none (never logged or shown).
        max_tokens: most tokens the model may generate for one reply (> 0).
        temperature: sampling temperature, 0 (greedy) to 2.
        timeout_s: longest wait (s) to connect, for the response to start and between two
            pieces of the stream; beyond it the reply fails.
    """

    url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    max_tokens: int = 512
    temperature: float = 0.7
    timeout_s: float = 30.0


class LLMResponder:
    """Stream replies from an OpenAI-compatible chat-completions server.

    One `AsyncOpenAI` client (one connection pool) per responder, shared by every session; no
    retries (a retry would repeat a reply the listener may already be hearing).

    Args:
        settings: server, model and sampling settings.
    """

    def __init__(self, settings: LLMSettings) -> None:
        self.settings = settings
        self._client = openai.AsyncOpenAI(
            base_url=settings.url,
            api_key=settings.api_key or "unused",
            timeout=settings.timeout_s,
            max_retries=0,
        )

    async def respond(self, prompt: Prompt) -> AsyncIterator[str]:
        """Yield the model's reply as content deltas, as the server streams them, with its
        reasoning spans cut out (`ReasoningFilter`).

        Raises:
            ResponderError: the server could not be reached or hung up, answered an HTTP
                error, timed out (`timeout_s`), broke off the stream, refused to answer (a
                `refusal` delta or `finish_reason` "content_filter"), sent an event that is not
                JSON, ended its stream before a `finish_reason`, or answered no text at all (or
                only whitespace).
                Text already yielded stays valid.
        """
        settings = self.settings
        answered = finished = False
        reasoning = ReasoningFilter()
        try:
            stream = await self._client.chat.completions.create(
                model=settings.model,
                messages=prompt.as_messages(),  # type: ignore[arg-type]
                max_tokens=min(settings.max_tokens,
                               prompt.max_output_tokens or settings.max_tokens),
                temperature=settings.temperature,
                stream=True,
            )
            async with stream:
                async for chunk in stream:
                    if not chunk.choices:
                        continue
                    choice = chunk.choices[0]
                    refusal = getattr(choice.delta, "refusal", None)
                    if refusal or choice.finish_reason == "content_filter":
                        raise ResponderError(_refused(refusal))
                    if content := reasoning.feed(choice.delta.content or ""):
                        answered = answered or not content.isspace()
                        yield content
                    finished = finished or choice.finish_reason is not None
            if content := reasoning.flush():
                answered = answered or not content.isspace()
                yield content
        except openai.APIStatusError as exc:
            raise ResponderError(
                f"the LLM server answered HTTP {exc.status_code}: {_detail(exc)}") from exc
        except openai.APITimeoutError as exc:
            raise ResponderError(
                f"the LLM server did not answer within {settings.timeout_s:g} s") from exc
        except openai.APIConnectionError as exc:
            raise ResponderError(f"no answer from the LLM server at {settings.url}: "
                                 f"{_cause(exc)}") from exc
        except httpx.TimeoutException as exc:
            raise ResponderError(
                f"the LLM server did not answer within {settings.timeout_s:g} s") from exc
        except (openai.APIError, httpx.HTTPError) as exc:
            raise ResponderError(f"the LLM stream failed: {_cause(exc)}") from exc
        except json.JSONDecodeError as exc:
            raise ResponderError(f"the LLM server sent a stream event that is not JSON: "
                                 f"{str(exc)[:ERROR_DETAIL_CHARS]}") from exc
        if not answered:
            raise ResponderError("the LLM answered no text")
        if not finished:
            raise ResponderError("the LLM stream ended before the reply was finished "
                                 "(no finish_reason)")


def _refused(refusal: str | None) -> str:
    if refusal:
        return f"the model refused to answer: {refusal[:ERROR_DETAIL_CHARS]}"
    return "the model refused to answer (content filter)"


def _detail(exc: openai.APIStatusError) -> str:
    """The server's own error message, shortened; its reason phrase when it sent none."""
    body = exc.body
    message = body.get("message") if isinstance(body, dict) else None
    if not isinstance(message, str) or not message:
        message = exc.response.reason_phrase or "no details"
    return message[:ERROR_DETAIL_CHARS]


def _cause(exc: BaseException) -> str:
    """A short description of what failed underneath (e.g. "ConnectError: ... refused")."""
    cause = exc.__cause__ or exc
    text = str(cause)[:ERROR_DETAIL_CHARS]
    return f"{type(cause).__name__}: {text}" if text else type(cause).__name__
