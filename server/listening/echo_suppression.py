"""Residual echo suppression in front of a turn's voice onset, in the audio handed to ASR.

A turn spoken over the reply starts at the person's voice onset less a margin
(`server.listening.vad.VOICE_ONSET_MARGIN_MS`), so its first tens of ms are the reply's echo.
`server.listening.echo.EchoDetector` knows that echo: the reply's band levels at the lag and
gain it measured before the turn (`EchoDetector.echo_levels`). This module takes the echo out
where it dominates, as the residual echo suppressor behind a linear echo canceller does (a
per-band Wiener-like gain on a short-time spectrum, e.g. WebRTC's AEC3 suppressor, or G.
Enzner, P. Vary, "Frequency-domain adaptive Kalman filter for acoustic echo control in
hands-free telephones", Signal Processing 86(6), 2006): with the microphone's band power Y and
the echo's predicted band power E, each band of a 10 ms frame is scaled by
sqrt(max(1 - `OVER_SUBTRACTION` E / Y, `FLOOR_GAIN` ^ 2)). Bands where the person is much louder
than the echo pass unchanged; the echo alone drops to the floor. The caller
(`server.listening.input_speech.InputSpeechDetector.without_echo`) applies it up to the voice
onset only; the committed audio itself is not changed.

Measured on bench_echo's failing case, its committed audio captured in 12 protocol runs
(espeak-ng en-us "Hold on a second." at -12 dBFS peak over the reply's -30 dB echo, 150 ms
late, -60 dBFS pink noise; the reply paused once the turn started, its echo audible for the
first 430-445 ms of the turn; the turn's audio 55-73 ms before the voice onset at -40 dBFS):
tiny.en wrote "Oh, not American." or "Oh, not a second." for 3 of them. What decides is the
echo in front of the soft "h": in 5 runs (2 of the failures), the same audio without the echo
of its first 40 ms was right in all 5; in the failing one of 3 runs tried so, the echo left in
front alone (none over the words) gave the failure, the echo over the words alone did not, and
the audio cut at the onset lost the "h" ("Bowled on the second."). Suppressed up to the voice
onset: right in the 6 runs made so (1 of the failures); suppressed over the whole turn (the
echo under the first words too) wrong in 1 of 6 ("Oh, not American.": the smeared echo
prediction took the "h" as well), and suppressed 40 ms into the voice, "Gold on the Falcon." in
2 of 5.

Sans-I/O: numpy only.
"""

from __future__ import annotations

import numpy as np

from server.listening.band_envelope import BAND_EDGES_HZ, FRAME_MS

OVER_SUBTRACTION = 2.0
"""The predicted echo power is taken this many times (+3 dB) before it is subtracted: the
echo gain is the lead-in's 25th percentile (`server.listening.echo_path.echo_gain`), a low
estimate, and the prediction is only as good as its 10 ms frames."""

FLOOR_GAIN = 0.1
"""Least amplitude gain (-20 dB): the echo alone drops to about the room's noise floor (a -30
dB echo of a reply at -3 dBFS peak ends near -53 dBFS, the pink floor of the echo rooms is
-60 dBFS RMS), not to digital silence, which whisper writes words for."""

WINDOW_MS = 2 * FRAME_MS
"""Short-time spectrum window (ms): square-root Hann analysis and synthesis windows at half
overlap, 50 % hop = `FRAME_MS`, which sum to one (perfect reconstruction with gains 1)."""


def band_gains(mic_db: np.ndarray, echo_db: np.ndarray) -> np.ndarray:
    """Amplitude gains (frames, bands) in [`FLOOR_GAIN`, 1] from the microphone's band levels
    and the echo's predicted ones (both (frames, bands), dB; -inf: no echo)."""
    ratio = 10.0 ** ((echo_db - mic_db) / 10.0)
    return np.sqrt(np.maximum(1.0 - OVER_SUBTRACTION * ratio, FLOOR_GAIN ** 2))


def suppress(pcm: np.ndarray, rate_hz: int, gains: np.ndarray, first_ms: float) -> np.ndarray:
    """`pcm` (1-D float at `rate_hz`) with each short-time spectrum scaled by `gains`
    ((frames, bands), amplitude, `band_gains`): gain row i applies to the 10 ms around
    `first_ms` + 10 i (ms from `pcm`'s first sample; rows before or after apply to the audio
    before or after them). Frequencies below `BAND_EDGES_HZ`'s first edge take the first
    band's gain, above its last edge the last band's. Same length as `pcm`."""
    samples = np.asarray(pcm, dtype=np.float32).reshape(-1)
    if samples.size == 0 or len(gains) == 0:
        return samples.copy()
    size = rate_hz * WINDOW_MS // 1000
    hop = size // 2
    window = np.sqrt(np.hanning(size + 1)[:-1])
    count = -(-samples.size // hop) + 1
    padded = np.zeros((count + 1) * hop, dtype=np.float64)
    padded[hop:hop + samples.size] = samples
    frames = np.lib.stride_tricks.sliding_window_view(padded, size)[::hop][:count]
    spectra = np.fft.rfft(frames * window, axis=1)
    freqs = np.fft.rfftfreq(size, 1.0 / rate_hz)
    band = np.clip(np.searchsorted(BAND_EDGES_HZ, freqs, side="right") - 1, 0,
                   len(BAND_EDGES_HZ) - 2)
    centres_ms = np.arange(count) * FRAME_MS
    rows = np.clip(np.rint((centres_ms - first_ms) / FRAME_MS).astype(int), 0, len(gains) - 1)
    spectra *= gains[rows][:, band]
    out = np.zeros_like(padded)
    for index, frame in enumerate(np.fft.irfft(spectra, size, axis=1) * window):
        out[index * hop:index * hop + size] += frame
    return out[hop:hop + samples.size].astype(np.float32)

