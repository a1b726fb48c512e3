"""Encoder window benchmark: how long and how well the person's ASR reads short turns when
their audio is padded to a shorter window than whisper's 30 s
(`calibration.whisper_window.PERSON_WINDOW_S`).

For each window (30 s: faster-whisper's own `transcribe`; shorter: `LocalWhisperTranscriber`'s
one greedy decode of the padded features), in-process tiny.en (int8, 2 threads, greedy, no
temperature fallback, no word timings, as `calibration.local_asr.person_transcriber`):

1. Sentences: the 24 `tests/test_vad.py` sentences by Piper and four espeak-ng voices (120
   utterances, 300 ms of silence each side): word error rate against the sentence, and the wall
   time of one transcription (p50 / p95).
2. Murmurs and short words over a paused reply: `benchmarks/bench_backchannel.py`'s 110
   recordings plus 13 short questions and refusals ("how come", "mm-mm", "huh?", ...) by the
   same five voices (175 in all, 300 ms before and 150 ms after, as a decision transcribes
   them), each transcript classified by `server.listening.backchannel.classify`: backchannels
   taken for backchannels (of 70), others taken for backchannels (of 105).

Target: the person's window (`PERSON_WINDOW_S`) reads the sentences no worse than 30 s (word
error rate at most 1 point above), takes at least as many backchannels and no other utterance
for one. Prints the command, machine facts, one table and the verdict; exit status 1 when it
fails. About 3 minutes on an idle 2-core machine.

Run from the project root: `.venv/bin/python -m benchmarks.bench_asr_window` (it imports the
`tests` helpers, so it must run as a module).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass

import numpy as np

from benchmarks.bench_backchannel import ESPEAK_VOICES, Recording, recordings
from benchmarks.measuring import percentile, print_run_header, verdict
from benchmarks.tables import print_table
from calibration.local_asr import LocalWhisperTranscriber
from calibration.whisper_window import PERSON_WINDOW_S, WHISPER_RATE_HZ, WHISPER_WINDOW_S
from server.listening.backchannel import Verdict, classify
from tests import speech_fixtures
from tests.echo_room import word_errors, words
from tests.test_vad import SENTENCES

WINDOWS_S = (30, 20, 15, 10)
"""Windows measured (s)."""

SHORT_OTHERS = ("how come", "how so", "he said what", "let me", "I hope", "anyhow", "is it",
                "mm-mm", "nope", "huh?", "sorry", "excuse me", "one moment")
"""Short utterances that are no backchannel, beside `bench_backchannel.INTERRUPTIONS`: words
that sound like a murmur ("how come?" was read "Hot comb.") and murmurs that mean no."""

VOICES = (("piper", None), *(("espeak", voice) for voice in ESPEAK_VOICES))


@dataclass
class WindowResult:
    """One window's measurements."""

    window_s: int
    word_errors: int = 0
    reference_words: int = 0
    backchannels_taken: int = 0
    others_taken: int = 0
    times_ms: list[float] | None = None

    @property
    def wer(self) -> float:
        return 100.0 * self.word_errors / max(self.reference_words, 1)


def short_utterances() -> list[Recording]:
    """`bench_backchannel.recordings()` and `SHORT_OTHERS` by `VOICES` (16 kHz)."""
    made = recordings()
    for text in SHORT_OTHERS:
        made.extend(Recording(text, "interruption", voice or engine,
                              speech_fixtures.speech(text, engine, voice))
                    for engine, voice in VOICES)
    return made


def measure(window_s: int, sentences: list[tuple[str, np.ndarray]],
            murmurs: list[Recording]) -> WindowResult:
    transcriber = LocalWhisperTranscriber(word_timestamps=False, temperature_fallback=False,
                                          window_s=window_s)
    result = WindowResult(window_s, times_ms=[])
    for text, pcm in sentences:
        started = time.perf_counter()
        heard = transcriber.transcribe_blocking(pcm, WHISPER_RATE_HZ)
        result.times_ms.append((time.perf_counter() - started) * 1000.0)
        result.word_errors += word_errors(text, heard)
        result.reference_words += len(words(text))
    for recording in murmurs:
        pcm = np.concatenate((speech_fixtures.silence(300), recording.pcm,
                              speech_fixtures.silence(150))).astype(np.float32)
        heard = transcriber.transcribe_blocking(pcm, WHISPER_RATE_HZ)
        taken = classify(heard, pcm, WHISPER_RATE_HZ).verdict is Verdict.BACKCHANNEL
        if recording.kind == "backchannel":
            result.backchannels_taken += taken
        else:
            result.others_taken += taken
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--windows", type=int, nargs="+", default=list(WINDOWS_S),
                        help=f"windows to measure, s (default {' '.join(map(str, WINDOWS_S))})")
    args = parser.parse_args()
    print_run_header()
    sentences = [(text, np.concatenate((speech_fixtures.silence(300),
                                        speech_fixtures.speech(text, engine, voice),
                                        speech_fixtures.silence(300))).astype(np.float32))
                 for text in SENTENCES for engine, voice in VOICES]
    murmurs = short_utterances()
    LocalWhisperTranscriber(word_timestamps=False).load()
    windows = sorted({*args.windows, WHISPER_WINDOW_S, PERSON_WINDOW_S}, reverse=True)
    results = {window: measure(window, sentences, murmurs) for window in windows}
    backchannels = sum(r.kind == "backchannel" for r in murmurs)
    print_table(f"{len(sentences)} sentences, {len(murmurs)} short utterances", [
        "window s", "WER %", "ms p50", "ms p95", f"backchannels taken (of {backchannels})",
        f"others taken (of {len(murmurs) - backchannels})"],
        [[str(r.window_s) + (" (person)" if r.window_s == PERSON_WINDOW_S else ""),
          f"{r.wer:.2f}", f"{percentile(r.times_ms or [], 50):.0f}",
          f"{percentile(r.times_ms or [], 95):.0f}", str(r.backchannels_taken),
          str(r.others_taken)] for r in results.values()])
    full, person = results[WHISPER_WINDOW_S], results[PERSON_WINDOW_S]
    ok = (person.wer <= full.wer + 1.0 and person.backchannels_taken >= full.backchannels_taken
          and person.others_taken == 0)
    print(f"person window {PERSON_WINDOW_S} s vs 30 s: WER {person.wer:.2f} vs {full.wer:.2f} %,"
          f" time p50 {percentile(person.times_ms or [], 50):.0f} vs "
          f"{percentile(full.times_ms or [], 50):.0f} ms: {verdict(ok)}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
