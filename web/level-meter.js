/** Range of the meter in dBFS. */
const MIN_DB = -90;
const MAX_DB = 0;
/** Time shown by the level trace. */
const TRACE_MS = 6000;

const STATE_LABELS = {
  off: 'mic off', idle: 'idle', speech: 'speech', echo: 'echo (ignored)', room: 'room (ignored)',
  fired: 'fired',
};

/**
 * The microphone level meter: a bar with the live level, the noise floor and the VAD onset
 * threshold; the VAD state (idle / speech / fired); a trace of the last TRACE_MS with markers
 * where the client VAD fired (orange) and where the server said speech started (blue); and a
 * line naming the latest server `input_audio_buffer.speech_started`.
 */
export class LevelMeter {
  #root;
  #bar;
  #fill;
  #floor;
  #threshold;
  #state;
  #readout;
  #server;
  #note;
  #canvas;
  /** {t, levelDb, noiseFloorDb, onsetDb} samples, oldest first (t: performance.now()) */
  #samples = [];
  /** {t, kind: 'fired'|'server'} */
  #markers = [];

  /** @param {HTMLElement} root the container (data-testid="level-meter") */
  constructor(root) {
    this.#root = root;
    const bar = part('div', 'meter-bar');
    this.#bar = bar;
    bar.setAttribute('role', 'meter');
    bar.setAttribute('aria-label', 'Microphone level');
    bar.setAttribute('aria-valuemin', String(MIN_DB));
    bar.setAttribute('aria-valuemax', String(MAX_DB));
    this.#fill = part('div', 'meter-fill');
    this.#floor = part('div', 'meter-floor');
    this.#floor.title = 'noise floor';
    this.#threshold = part('div', 'meter-threshold');
    this.#threshold.title = 'VAD onset threshold';
    bar.append(this.#fill, this.#floor, this.#threshold);
    this.#state = part('span', 'vad-state');
    this.#state.dataset.testid = 'vad-state';
    this.#readout = part('span', 'meter-readout');
    this.#server = part('span', 'server-speech');
    this.#server.dataset.testid = 'speech-started-marker';
    this.#note = part('span', 'server-vad');
    this.#note.dataset.testid = 'server-vad';
    this.#note.setAttribute('role', 'status');
    const info = part('div', 'meter-info');
    info.append(this.#readout, this.#server, this.#note);
    this.#canvas = part('canvas', 'meter-trace');
    this.#canvas.setAttribute('aria-hidden', 'true');
    root.append(this.#state, bar, this.#canvas, info);
    this.setOff();
  }

  /** The microphone is off: empty bar, state 'mic off' (the trace and markers are kept). */
  setOff() {
    this.#root.dataset.vadState = 'off';
    this.#state.textContent = STATE_LABELS.off;
    this.#fill.style.width = '0%';
    this.#floor.hidden = true;
    this.#threshold.hidden = true;
    this.#readout.textContent = '';
    this.#bar.setAttribute('aria-valuenow', String(MIN_DB));
  }

  /**
   * Show one level report of the capture worklet (dBFS values; state 'idle'|'speech'|'echo'|'room'|'fired').
   * @param {{levelDb: number, noiseFloorDb: number, onsetDb: number, state: string,
   *   playing: boolean}} level
   */
  update(level) {
    const { levelDb, noiseFloorDb, onsetDb, state, playing } = level;
    this.#root.dataset.vadState = state;
    this.#state.textContent = STATE_LABELS[state] ?? state;
    this.#fill.style.width = `${percent(levelDb)}%`;
    this.#floor.hidden = false;
    this.#floor.style.left = `${percent(noiseFloorDb)}%`;
    this.#threshold.hidden = false;
    this.#threshold.style.left = `${percent(onsetDb)}%`;
    this.#bar.setAttribute('aria-valuenow', String(Math.round(levelDb)));
    const guard = playing ? ' · echo guard on' : '';
    this.#readout.textContent =
      `level ${db(levelDb)} · floor ${db(noiseFloorDb)} · onset ${db(onsetDb)}${guard}`;
    const now = performance.now();
    this.#samples.push({ t: now, levelDb, noiseFloorDb, onsetDb });
    while (this.#samples.length && this.#samples[0].t < now - TRACE_MS) this.#samples.shift();
    this.#draw(now);
  }

  /** Show a note about server turn detection; `tone` 'warn' colours it as a problem. */
  setNote(text, tone = '') {
    this.#note.textContent = text;
    this.#note.dataset.tone = tone;
  }

  /** Mark the moment the client VAD fired (performance.now() time `t`). */
  markFired(t) {
    this.#markers.push({ t, kind: 'fired' });
  }

  /** Mark a server `input_audio_buffer.speech_started` (received now). */
  markServerSpeech(event) {
    this.#markers.push({ t: performance.now(), kind: 'server' });
    const clock = new Date().toLocaleTimeString();
    this.#server.textContent =
      `server heard speech at ${event.audio_start_ms} ms of input (${clock})`;
    this.#server.classList.remove('flash');
    // Restart the highlight animation (reading offsetWidth forces the style change to apply).
    void this.#server.offsetWidth;
    this.#server.classList.add('flash');
  }

  #draw(now) {
    const canvas = this.#canvas;
    const scale = window.devicePixelRatio || 1;
    const width = Math.round(canvas.clientWidth * scale);
    const height = Math.round(canvas.clientHeight * scale);
    if (!width || !height) return;
    if (canvas.width !== width || canvas.height !== height) {
      canvas.width = width;
      canvas.height = height;
    }
    const styles = getComputedStyle(this.#root);
    const color = (name) => styles.getPropertyValue(name).trim();
    const g = canvas.getContext('2d');
    g.clearRect(0, 0, width, height);
    const x = (t) => width - ((now - t) / TRACE_MS) * width;
    const y = (value) => height - (percent(value) / 100) * height;
    const line = (key, stroke, dash) => {
      g.beginPath();
      g.setLineDash(dash);
      g.strokeStyle = stroke;
      g.lineWidth = 1.5 * scale;
      this.#samples.forEach((sample, i) => {
        const draw = i ? g.lineTo : g.moveTo;
        draw.call(g, x(sample.t), y(sample[key]));
      });
      g.stroke();
    };
    line('noiseFloorDb', color('--muted'), [2 * scale, 2 * scale]);
    line('onsetDb', color('--warn'), [4 * scale, 3 * scale]);
    line('levelDb', color('--accent'), []);
    this.#markers = this.#markers.filter((marker) => marker.t >= now - TRACE_MS);
    g.setLineDash([]);
    for (const marker of this.#markers) {
      g.fillStyle = color(marker.kind === 'server' ? '--accent' : '--warn');
      g.fillRect(x(marker.t) - scale, 0, 2 * scale, height);
    }
  }
}

function part(tag, className) {
  const element = document.createElement(tag);
  element.className = className;
  return element;
}

/** Position of `value` dBFS on the meter, in percent. */
function percent(value) {
  return (Math.min(Math.max(value, MIN_DB), MAX_DB) - MIN_DB) / (MAX_DB - MIN_DB) * 100;
}

function db(value) {
  return `${Math.round(value)} dBFS`;
}
