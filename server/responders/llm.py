"""A responder backed by any OpenAI-compatible chat-completions server, streaming.

`LLMResponder` sends `Prompt.as_messages()` (the instructions, the history as heard with a note
after each interrupted turn, the new user turn) to `POST {url}/chat/completions` with
`stream: true` through the `openai` package's `AsyncOpenAI`, and yields each content delta as it
arrives, without reasoning: `reasoning_content` deltas are not read, and `<think>` spans in the
content are cut out (`server.responders.reasoning`). Works with vLLM, llama.cpp's server (and
llama-cpp-python's), Ollama's `/v1` and hosted APIs.

With the prompt's `tools` (a Realtime session's function tools), they are offered to the model
(`tools`, `tool_choice`), and the reply's function calls are yielded after its text as
`ToolCall`s: streamed `delta.tool_calls`, and tool-call markup the model wrote into its content
instead (`server.responders.tools.ToolCallMarkup`), which is then not part of the text.

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
from server.responders.tools import StreamedToolCalls, ToolCall, ToolCallMarkup

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

    async def respond(self, prompt: Prompt) -> AsyncIterator[str | ToolCall]:
        """Yield the model's reply as content deltas, as the server streams them, with its
        reasoning spans cut out (`ReasoningFilter`); then its function calls (`ToolCall`s,
        streamed or written as markup) when the prompt offered tools.

        Raises:
            ResponderError: the server could not be reached or hung up, answered an HTTP
                error, timed out (`timeout_s`), broke off the stream, refused to answer (a
                `refusal` delta or `finish_reason` "content_filter"), sent an event that is not
                JSON, ended its stream before a `finish_reason`, or answered no text at all (or
                only whitespace) and called no function.
                Text already yielded stays valid.
        """
        settings = self.settings
        answered = finished = False
        reasoning = ReasoningFilter()
        streamed = StreamedToolCalls()
        markup = ToolCallMarkup(tool["function"]["name"] for tool in prompt.tools)
        offered = {"tools": list(prompt.tools), "tool_choice": prompt.tool_choice} if (
            prompt.tools) else {}
        try:
            stream = await self._client.chat.completions.create(
                model=settings.model,
                messages=prompt.as_messages(),  # type: ignore[arg-type]
                max_tokens=min(settings.max_tokens,
                               prompt.max_output_tokens or settings.max_tokens),
                temperature=settings.temperature,
                stream=True,
                **offered,  # type: ignore[arg-type]
            )
            async with stream:
                async for chunk in stream:
                    if not chunk.choices:
                        continue
                    choice = chunk.choices[0]
                    refusal = getattr(choice.delta, "refusal", None)
                    if refusal or choice.finish_reason == "content_filter":
                        raise ResponderError(_refused(refusal))
                    streamed.feed(choice.delta.tool_calls or ())
                    content = reasoning.feed(choice.delta.content or "")
                    if content := markup.feed(content) if prompt.tools else content:
                        answered = answered or not content.isspace()
                        yield content
                    finished = finished or choice.finish_reason is not None
            content = reasoning.flush()
            if content := markup.feed(content) + markup.flush() if prompt.tools else content:
                answered = answered or not content.isspace()
                yield content
            for call in [*streamed.calls(), *markup.calls] if prompt.tools else ():
                answered = True
                yield call
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
