"""Opening the sound card with `sounddevice` (PortAudio), with one-line errors.

`sounddevice` loads the PortAudio library when it is imported and raises `OSError` when the
library is missing; PortAudio raises `sounddevice.PortAudioError` when there is no default
device or it refuses the format. Both become `AudioUnavailable` with a message for the person.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

CHANNELS = 1
"""Mono: the session's audio is mono."""


class AudioUnavailable(Exception):
    """PortAudio or a needed device is missing or refuses the stream; `str()` is one line
    saying which and what to do."""


def load_sounddevice() -> Any:
    """Import `sounddevice` (which loads PortAudio).

    Raises:
        AudioUnavailable: the PortAudio library is not installed.
    """
    try:
        import sounddevice
    except OSError as error:
        raise AudioUnavailable(
            f"PortAudio is not installed ({error}); install it, e.g. "
            "`sudo apt-get install libportaudio2`") from error
    return sounddevice


def check_devices(microphone: bool) -> None:
    """Check that PortAudio and a default output device (and input device with `microphone`)
    exist, before anything else is done.

    Raises:
        AudioUnavailable: one of them is missing.
    """
    sd = load_sounddevice()
    for kind, needed in (("output", True), ("input", microphone)):
        if not needed:
            continue
        try:
            sd.query_devices(kind=kind)
        except (sd.PortAudioError, ValueError) as error:
            hint = " (pass --no-mic to type instead)" if kind == "input" else ""
            raise AudioUnavailable(f"no audio {kind} device{hint}: {error}") from error


def open_stream(rate_hz: int, microphone: bool,
                callback: Callable[..., None]) -> Any:
    """Open (not start) a PortAudio stream on the default devices at `rate_hz`, mono float32:
    duplex (`sounddevice.Stream`) with `microphone`, else output only
    (`sounddevice.OutputStream`). `callback` gets `(indata, outdata, frames, time, status)`;
    `indata` is None without the microphone.

    Raises:
        AudioUnavailable: PortAudio is missing, there is no default output device (or input
            device with `microphone`), or the device refuses the rate.
    """
    check_devices(microphone)
    sd = load_sounddevice()
    try:
        if microphone:
            return sd.Stream(samplerate=rate_hz, channels=CHANNELS, dtype="float32",
                             callback=callback)
        return sd.OutputStream(
            samplerate=rate_hz, channels=CHANNELS, dtype="float32",
            callback=lambda outdata, frames, time, status: callback(
                None, outdata, frames, time, status))
    except (sd.PortAudioError, ValueError) as error:
        raise AudioUnavailable(f"the audio device refused {rate_hz} Hz mono: {error}") from error
