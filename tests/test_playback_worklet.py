"""The page's playback worklet (web/playback-worklet.js) in headless Chromium, driven by its own
messages: the order in which the server's pause (`response.paused`) and the page's VAD
(`barge-in` on the level port) reach a playing reply.

The CI rehearsal of f4d8d10 failed
tests/test_browser_microphone.py::test_speech_over_a_reply_cuts_it_at_the_onset_and_is_answered:
the server's VAD paused the reply first (`response.paused`, audio_end_ms 2338), the page's VAD
fired on the person's question about 2 s later, and the worklet, its reply paused already,
reported nothing: no `barge_in` went. A person who speaks over a reply is the page's barge-in
whichever VAD decides first: here each order runs on the real worklet, with no timing.
"""

from __future__ import annotations

from typing import Any

from tests.browser import chromium, open_demo

DRIVE_WORKLET = """async (steps) => {
  const context = new AudioContext({sampleRate: 48000});
  await context.audioWorklet.addModule('/playback-worklet.js');
  const node = new AudioWorkletNode(context, 'playback-processor');
  node.connect(context.destination);
  const reports = [];
  let progress = 0; // progress reports so far
  let rendered = 0;
  node.port.onmessage = (event) => {
    if (event.data.type === 'progress') {
      progress += 1;
      rendered = event.data.renderedFrames;
    } else {
      reports.push(event.data);
    }
  };
  const levels = new MessageChannel();
  node.port.postMessage({type: 'level-port', port: levels.port1}, [levels.port1]);
  const tone = new Float32Array(48000 * 5);
  for (let i = 0; i < tone.length; i += 1) tone[i] = 0.1 * Math.sin(i / 10);
  const until = async (done) => {
    const asked = performance.now();
    while (!done()) {
      if (performance.now() - asked > 10000) throw new Error('the worklet stopped reporting');
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  };
  node.port.postMessage({type: 'barge-in-mode', pause: true});
  node.port.postMessage({type: 'start', responseId: 'r1'});
  node.port.postMessage({type: 'audio', responseId: 'r1', samples: tone});
  await until(() => rendered > 0);
  for (const step of steps) {
    if (step === 'vad') levels.port2.postMessage({type: 'barge-in'});
    else node.port.postMessage({type: step, responseId: 'r1'});
    const after = progress;
    await until(() => progress >= after + 4);
  }
  await context.close();
  return reports.map(({type, reason, at, renderedFrames}) => ({type, reason, at, renderedFrames}));
}"""
"""Play 5 s of a tone as response 'r1' in pause mode; once some of it rendered, apply `steps` in
order, the next once four progress reports (200 ms of output) followed: 'vad' (the capture
worklet's `barge-in` on the level port), 'pause' / 'resume' (the server's `response.paused` /
`response.resumed`); returns the worklet's reports but its progress ones: {type, reason, at,
renderedFrames}."""


async def worklet_reports(start_server: Any, steps: list[str]) -> list[dict[str, Any]]:
    """The playback worklet's reports for `steps` (DRIVE_WORKLET) on the demo page's origin."""
    server = await start_server(tts="uniform", calibration="marks")
    async with chromium() as browser, open_demo(browser, server.http_url) as demo:
        return await demo.page.evaluate(DRIVE_WORKLET, steps)


async def test_the_page_s_vad_over_a_reply_the_server_paused_first_is_a_barge_in(
    start_server,
) -> None:
    reports = await worklet_reports(start_server, ["pause", "vad", "vad", "resume", "vad", "vad"])
    assert [(r["type"], r["reason"]) for r in reports] == [
        ("paused", "pause"),  # the server's pause
        ("paused", "barge-in"),  # the page's VAD over it: once per pause
        ("resumed", None),
        ("paused", "barge-in"),  # the page's VAD pauses the resumed reply itself
    ]
    server_pause, barge_in, resumed, own_pause = reports
    # The barge-in over the server's pause is silent where that pause silenced the reply.
    assert barge_in["at"] == server_pause["at"]
    assert barge_in["renderedFrames"] == server_pause["renderedFrames"] == resumed[
        "renderedFrames"]
    assert own_pause["at"] > barge_in["at"]
    assert own_pause["renderedFrames"] > resumed["renderedFrames"]


async def test_the_server_s_pause_after_the_page_s_barge_in_adds_nothing(
    start_server,
) -> None:
    reports = await worklet_reports(start_server, ["vad", "pause", "vad"])
    assert [(r["type"], r["reason"]) for r in reports] == [("paused", "barge-in")]
