/**
 * AudioWorkletProcessor "playback-processor": plays the assistant's audio of ONE response at a
 * time (mono Float32 frames at the context rate) and counts the frames it actually rendered.
 *
 * Messages from the main thread:
 *   {type: 'start', responseId}           make responseId current; a still-current older response
 *                                         is reported as stopped (reason 'superseded') first
 *   {type: 'audio', responseId, samples}  Float32Array; dropped unless responseId is current
 *   {type: 'end', responseId}             no more audio will come for responseId
 *   {type: 'stop', responseId}            stop responseId now; ignored unless it is current, so a
 *                                         late stop for an old response never cuts a newer one
 *   {type: 'pause', responseId}           stop rendering responseId now but keep its queued audio
 *                                         (the server's `response.paused`)
 *   {type: 'resume', responseId}          continue rendering it exactly where it paused
 *   {type: 'barge-in-mode', pause}        what the client VAD's barge-in does: pause the reply
 *                                         (true: the server then decides, `response.paused`;
 *                                         not once its audio ended) or stop it (false, default)
 *   {type: 'level-port', port}            MessagePort to the capture worklet (echo guard of the
 *                                         client VAD); replaces an earlier one
 *
 * Messages on the level port, from the capture worklet:
 *   {type: 'barge-in'}   the client VAD fired: stop (or, in pause mode, pause) the current
 *                        response now if any of its audio was rendered (reason 'barge-in'); a
 *                        response not heard yet is the server's to stop. Straight from the capture thread, so that the person's
 *                        speech silences the reply without waiting for the page's main thread.
 *                        A response the server paused first (its VAD heard the person before
 *                        this page's did: `response.paused`) stays paused and is reported
 *                        paused again with reason 'barge-in', once per pause, `at` where its
 *                        rendering paused: the person's speech over it is this page's barge-in
 *                        all the same, whichever VAD decided first.
 *
 * Reports to the main thread (renderedFrames counts frames written to the output, per response):
 *   {type: 'progress', responseId, renderedFrames, rendering, queueEmpty}   every ~REPORT_MS
 *   {type: 'stopped', responseId, renderedFrames, reason, at}   exactly once, before the reset;
 *       reason 'stop' | 'superseded' | 'barge-in'; at: this context's currentTime (s) when it
 *       stopped (the output is silent from the next render quantum on)
 *   {type: 'drained', responseId, renderedFrames}   the response's audio ended and was all rendered
 *   {type: 'paused', responseId, renderedFrames, reason, at}   rendering paused ('pause' | 'barge-in');
 *       at: when it paused (a barge-in on a reply the server paused first: that pause's time)
 *   {type: 'resumed', responseId, renderedFrames}   rendering continued after a pause
 *
 * Reports on the level port, every 10 ms of output (band-envelope.js frames):
 *   {type: 'level', db, bands, active, ageS}   the output's band levels (Float32Array, dB) and
 *                                 their total in dBFS (RMS over 100-7000 Hz, at least -100),
 *                                 whether any of it was assistant audio, and how long ago (s of
 *                                 output) it was rendered: 0, except for the last
 *                                 LEVEL_HISTORY_MS of levels sent (oldest first) when a port is
 *                                 set, so that the echo guard knows what played just before the
 *                                 microphone started
 */
import { BandEnvelope, FRAME_MS, totalDb } from './band-envelope.js';


/** Rendering of a response starts once this much is queued (or its audio ended): jitter buffer. */
const JITTER_MS = 100;
/** Interval of the 'progress' reports. */
const REPORT_MS = 50;
/** Output levels kept for a newly linked level port: the echo guard's window plus its longest
 * delay (vad.js echoWindowMs + echoMaxLagMs). */
const LEVEL_HISTORY_MS = 1000;

class PlaybackProcessor extends AudioWorkletProcessor {
  constructor() {
    super();
    this.jitterFrames = Math.round((sampleRate * JITTER_MS) / 1000);
    this.reportFrames = Math.round((sampleRate * REPORT_MS) / 1000);
    this.framesSinceReport = 0;
    this.bandEnvelope = new BandEnvelope(sampleRate);
    this.levelPort = null;
    this.levelActive = false;
    this.levelHistory = []; // [db, bands, active] of the last LEVEL_HISTORY_MS, oldest first
    this.pauseOnBargeIn = false;
    this.reset(null);
    this.port.onmessage = (event) => this.handle(event.data);
  }

  /** Forget the queue and counters and make `responseId` (or nothing) current. */
  reset(responseId) {
    this.responseId = responseId;
    this.queue = [];
    this.head = 0; // read offset into queue[0]
    this.queuedFrames = 0;
    this.renderedFrames = 0;
    this.audioEnded = false;
    this.rendering = false;
    this.paused = false;
    this.pausedAt = null; // currentTime (s) when rendering paused
    this.bargedIn = false; // the client VAD's barge-in was reported for this pause
  }

  handle(message) {
    if (message.type === 'level-port') {
      this.levelPort?.close();
      this.levelPort = message.port;
      this.levelPort.onmessage = (event) => this.bargeIn(event.data);
      const count = this.levelHistory.length;
      this.levelHistory.forEach(([db, bands, active], i) => {
        this.levelPort.postMessage({
          type: 'level', db, bands, active, ageS: ((count - i) * FRAME_MS) / 1000,
        });
      });
      return;
    }
    const current = message.responseId === this.responseId;
    switch (message.type) {
      case 'start':
        if (current) return;
        this.report('stopped', 'superseded');
        this.reset(message.responseId);
        break;
      case 'audio':
        if (!current || this.audioEnded || message.samples.length === 0) return;
        this.queue.push(message.samples);
        this.queuedFrames += message.samples.length;
        break;
      case 'end':
        if (current) this.audioEnded = true;
        break;
      case 'stop':
        if (!current) return;
        this.report('stopped', 'stop');
        this.reset(null);
        break;
      case 'pause':
        if (current) this.pause('pause');
        break;
      case 'resume':
        if (!current || !this.paused) return;
        this.paused = false;
        this.bargedIn = false;
        this.report('resumed');
        break;
      case 'barge-in-mode':
        this.pauseOnBargeIn = Boolean(message.pause);
        break;
    }
  }

  /** Stop rendering the current response, keeping its queue; `reason` 'pause' | 'barge-in'. */
  pause(reason) {
    if (this.paused || this.responseId === null) return;
    this.paused = true;
    this.pausedAt = currentTime;
    this.bargedIn = reason === 'barge-in';
    this.report('paused', reason);
  }

  /** A message from the capture worklet: the client VAD fired. */
  bargeIn(message) {
    if (message.type !== 'barge-in' || this.responseId === null || this.renderedFrames === 0) {
      return;
    }
    // The server's VAD paused the reply before this page's VAD decided (CI rehearsal of
    // f4d8d10: paused at 2338 ms, the page's VAD fired on the person about 2 s later and no
    // barge_in went): it is this page's barge-in on the paused reply all the same.
    if (this.paused) {
      if (!this.bargedIn) this.report('paused', 'barge-in', this.pausedAt);
      this.bargedIn = true;
      return;
    }
    // A reply whose audio all arrived (the server finished it) cannot be paused there: stop it.
    if (this.pauseOnBargeIn && !this.audioEnded) {
      this.pause('barge-in');
      return;
    }
    this.report('stopped', 'barge-in');
    this.reset(null);
  }

  /** Post a report about the current response, if there is one; `at`: its time (s, this
   * context's currentTime), now unless given. */
  report(type, reason, at = currentTime) {
    if (this.responseId === null) return;
    this.port.postMessage({
      type,
      responseId: this.responseId,
      renderedFrames: this.renderedFrames,
      reason,
      rendering: this.rendering,
      queueEmpty: this.queuedFrames === 0,
      at,
    });
  }

  /** Copy queued frames into `out`; returns how many were written. */
  render(out) {
    let written = 0;
    while (written < out.length && this.queue.length > 0) {
      const chunk = this.queue[0];
      const count = Math.min(out.length - written, chunk.length - this.head);
      out.set(chunk.subarray(this.head, this.head + count), written);
      written += count;
      this.head += count;
      if (this.head === chunk.length) {
        this.queue.shift();
        this.head = 0;
      }
    }
    this.queuedFrames -= written;
    this.renderedFrames += written;
    return written;
  }

  process(_inputs, outputs) {
    const out = outputs[0][0];
    let written = 0;
    if (this.responseId !== null && !this.paused) {
      this.rendering ||= this.audioEnded || this.queuedFrames >= this.jitterFrames;
      if (this.rendering) written = this.render(out);
    }
    out.fill(0, written);
    this.measure(out, written > 0);

    if (this.responseId === null) return true;
    if (this.rendering && !this.paused && this.audioEnded && this.queuedFrames === 0) {
      this.report('drained');
      this.reset(null);
      return true;
    }
    this.framesSinceReport += out.length;
    if (this.framesSinceReport >= this.reportFrames) {
      this.framesSinceReport = 0;
      this.report('progress');
    }
    return true;
  }

  /** Measure the output's band levels; keep and post each completed frame's on the level port. */
  measure(out, active) {
    this.levelActive ||= active;
    for (const bands of this.bandEnvelope.push(out)) {
      const db = Math.max(-100, totalDb(bands));
      this.levelHistory.push([db, bands, this.levelActive]);
      if (this.levelHistory.length > LEVEL_HISTORY_MS / FRAME_MS) this.levelHistory.shift();
      this.levelPort?.postMessage({ type: 'level', db, bands, active: this.levelActive, ageS: 0 });
      this.levelActive = active;
    }
  }
}

registerProcessor('playback-processor', PlaybackProcessor);
