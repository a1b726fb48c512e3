"""OpenAI's GA request objects, validated once against the `openai` package's typed schema.

The session object of `session.update` and the response object of `response.create` are
checked against the `openai` package's own TypedDicts (`RealtimeSessionCreateRequestParam`,
`RealtimeResponseCreateParamsParam`, generated from OpenAI's OpenAPI spec) with pydantic, strictly
and with unknown fields refused, so that this server refuses exactly the fields and values
OpenAI's schema refuses and names every one of them at once. What the server then does with
each accepted field is `server.realtime.protocol`'s and the session's business. Sans-I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from openai.types.realtime.realtime_response_create_params_param import (
    RealtimeResponseCreateParamsParam,
)
from openai.types.realtime.realtime_session_create_request_param import (
    RealtimeSessionCreateRequestParam,
)
from pydantic import BaseModel, ConfigDict, ValidationError

NULLABLE = frozenset({("audio", "input", "noise_reduction"), ("audio", "input", "transcription")})
"""Fields OpenAI accepts as null (meaning off) although the package's TypedDicts do not say so:
`@openai/agents-realtime` sends `noise_reduction: null` in every update (issue 25)."""

RANGES: dict[tuple[str, ...], tuple[float, float]] = {
    ("max_output_tokens",): (1, 4096),
    ("audio", "output", "speed"): (0.25, 1.5),
}
"""Numeric bounds OpenAI documents beside the types (the `openai` package's docstrings: "an
integer between 1 and 4096"; speed "0.25 to 1.5")."""


class _Session(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    session: RealtimeSessionCreateRequestParam


class _Response(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    response: RealtimeResponseCreateParamsParam


@dataclass(frozen=True, slots=True)
class FieldError:
    """One refused field: OpenAI's error `code`, the dotted `param` and a `message`."""

    code: str
    param: str
    message: str


_CODES = {"extra_forbidden": "unknown_parameter", "missing": "missing_required_parameter"}


def _code(pydantic_type: str) -> str:
    """OpenAI's error code for a pydantic error type."""
    if pydantic_type in _CODES:
        return _CODES[pydantic_type]
    return "invalid_type" if pydantic_type.endswith("_type") else "invalid_value"


def _param(data: Any, error: Any) -> tuple[tuple[str, ...], bool]:
    """The path of pydantic `error`'s location in `data`, and whether it stopped at a union.

    The path stops at pydantic's first union-member tag (a location element that is not a key
    or index of the input), so that the alternatives of one union make one error on the
    union's field; the key of a `missing` error stays in the path."""
    path: list[str] = []
    loc = error["loc"]
    for index, part in enumerate(loc):
        found = (isinstance(data, dict) and part in data) or (
            isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data))
        if found:
            data = data[part]
        elif error["type"] != "missing" or index != len(loc) - 1:
            return tuple(path), True
        path.append(str(part))
    return tuple(path), False


def _errors(model: type[BaseModel], key: str, value: dict[str, Any]) -> list[FieldError]:
    """Every field of `{key: value}` that `model` refuses, one `FieldError` per field."""
    try:
        model.model_validate({key: value})
    except ValidationError as exc:
        found: dict[tuple[str, ...], FieldError] = {}
        for error in exc.errors(include_url=False):
            path, in_union = _param({key: value}, error)
            param = ".".join(path)
            code = "invalid_value" if in_union else _code(error["type"])
            known = found.get(path)
            if known is not None:
                if error["msg"] not in known.message:
                    found[path] = FieldError(known.code, param,
                                             f"{known.message[:-1]}; or {error['msg']}.")
            elif code == "unknown_parameter":
                found[path] = FieldError(code, param, f"Unknown parameter: '{param}'.")
            elif code == "missing_required_parameter":
                found[path] = FieldError(code, param, f"Missing required parameter: '{param}'.")
            else:
                found[path] = FieldError(code, param, f"Invalid '{param}': {error['msg']}.")
        return list(found.values())
    return []


def _without_nulls(session: dict[str, Any]) -> dict[str, Any]:
    """`session` without the NULLABLE fields that are null (a shallow copy along their path)."""
    copy = dict(session)
    for path in NULLABLE:
        container: Any = copy
        for key in path[:-1]:
            if not isinstance(container.get(key), dict):
                break
            container[key] = container = dict(container[key])
        else:
            if path[-1] in container and container[path[-1]] is None:
                del container[path[-1]]
    return copy


def _range_errors(session: dict[str, Any]) -> list[FieldError]:
    errors = []
    for path, (low, high) in RANGES.items():
        value: Any = session
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, int | float) and not isinstance(value, bool) and not (
            low <= value <= high
        ):
            param = "session." + ".".join(path)
            errors.append(FieldError("invalid_value", param,
                                     f"Invalid '{param}': must be in [{low}, {high}]."))
    return errors


def session_errors(session: dict[str, Any]) -> list[FieldError]:
    """Every field of a `session.update`'s session object that OpenAI's GA schema refuses.

    `type` may be left out (OpenAI requires it; older clients of this server do not send it);
    null is accepted where OpenAI accepts it (`NULLABLE`); numbers are checked against RANGES.

    Args:
        session: the session object (a dict; the extension fields already taken out).

    Returns:
        One FieldError per refused field (params prefixed `session.`), empty when valid.
    """
    checked = _without_nulls({"type": "realtime", **session})
    errors = _errors(_Session, "session", checked)
    return errors + [e for e in _range_errors(checked) if e.param not in
                     {known.param for known in errors}]


METADATA_LIMITS = (16, 64, 512)
"""OpenAI's `Metadata`: at most 16 pairs, keys of at most 64 and values of at most 512
characters (the `openai` package's docstring of `metadata`)."""


def response_errors(response: dict[str, Any]) -> list[FieldError]:
    """Every field of a `response.create`'s response object that OpenAI's GA schema refuses
    (params prefixed `response.`, `metadata` checked against METADATA_LIMITS); empty when
    valid.

    A top-level field that is null counts as not given, as OpenAI takes it: every field of
    the response object is optional, and `livekit-plugins-openai`'s `generate_reply()` sends
    `instructions: null` whenever it has none of its own (issue 25)."""
    errors = _errors(_Response, "response",
                     {key: value for key, value in response.items() if value is not None})
    metadata = response.get("metadata")
    pairs, key_chars, value_chars = METADATA_LIMITS
    if isinstance(metadata, dict) and not errors and (
        len(metadata) > pairs or any(len(k) > key_chars or len(str(v)) > value_chars
                                     for k, v in metadata.items())):
        errors.append(FieldError(
            "invalid_value", "response.metadata", f"Invalid 'response.metadata': at most "
            f"{pairs} pairs, keys of {key_chars} and values of {value_chars} characters."))
    return errors
