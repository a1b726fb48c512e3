// One whole conversation of the OpenAI Agents JS SDK (`@openai/agents-realtime`) with the demo
// server, as a user of the SDK writes it: a RealtimeAgent in a RealtimeSession over the
// websocket transport, every setting at the SDK's default (its own session.update on connect:
// semantic_vad, noise_reduction null, tracing "auto", transcription, ...).
//
// Usage: node conversation.mjs WS_URL QUESTION_PCM
//   WS_URL        ws://127.0.0.1:PORT/v1/realtime
//   QUESTION_PCM  a spoken question: raw PCM16 LE mono at 24 kHz (the SDK's default input format)
//
// Steps, in order (each waits for the server's `response.done` of its reply):
//   1. connect (the SDK's session setup);
//   2. text turn: sendMessage("say: It is sunny today."), its audio received;
//   3. spoken turn: sendAudio() of the question in 40 ms chunks at real time, then 1.5 s of
//      silence; the server's VAD ends the turn and answers;
//   4. interruption: sendMessage("say: <long reply>"), and 1.2 s after its first audio arrived
//      session.interrupt() (the SDK sends its own truncate at the elapsed time);
//   5. second turn: sendMessage("Where did you stop?") (the demo responder answers from the
//      heard text its prompt holds).
// Output on stdout: session_log.mjs's records, with a {"step": name} at each step's start and
// {"history": [...]} (the SDK's own conversation history) at the end. Exit status 0 once every
// step ended; 1 on a timeout (STEP_TIMEOUT_MS) or a failed connect.
import { readFileSync } from 'node:fs';
import { RealtimeAgent, RealtimeSession } from '@openai/agents-realtime';
import { logSession, next, write } from './session_log.mjs';

const [url, questionPath] = process.argv.slice(2);
const CHUNK_MS = 40;
const RATE_HZ = 24_000;
const INTERRUPT_AFTER_MS = 1200;
const LONG_REPLY = 'say: The first planet is Mercury, the smallest and the closest to the sun. '
  + 'Venus comes next, wrapped in thick clouds of acid. Then our own Earth, the only world we '
  + 'know with life. Mars is red and dusty, with the tallest volcano of all.';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const session = logSession(new RealtimeSession(new RealtimeAgent({
  name: 'Assistant',
  instructions: 'You are a helpful voice assistant.',
}), { transport: 'websocket' }));

async function turn(name, start) {
  write({ step: name });
  const created = next((e) => e.type === 'response.created');
  start();
  const { response } = await created;
  return next((e) => e.type === 'response.done' && e.response.id === response.id);
}

async function main() {
  write({ step: 'connect' });
  const updated = next((e) => e.type === 'session.updated');
  await session.connect({ apiKey: 'not-needed-on-loopback', url });
  await updated;

  await turn('text', () => session.sendMessage('say: It is sunny today.'));
  await sleep(2500); // its audio plays out (at real time: the SDK reports no playback)

  const question = readFileSync(questionPath);
  const chunkBytes = (RATE_HZ * CHUNK_MS / 1000) * 2;
  const silence = Buffer.alloc(RATE_HZ * 2 * 1.5);
  const audio = Buffer.concat([question, silence]);
  write({ step: 'spoken' });
  const spokenCreated = next((e) => e.type === 'response.created');
  const started = Date.now();
  for (let offset = 0; offset < audio.length; offset += chunkBytes) {
    const chunk = audio.subarray(offset, offset + chunkBytes);
    session.sendAudio(chunk.buffer.slice(chunk.byteOffset, chunk.byteOffset + chunk.length));
    await sleep(Math.max(0, started + ((offset / chunkBytes) + 1) * CHUNK_MS - Date.now()));
  }
  const spoken = (await spokenCreated).response;
  await next((e) => e.type === 'response.done' && e.response.id === spoken.id);
  await sleep(1500); // the reply plays out

  write({ step: 'interrupt' });
  const longCreated = next((e) => e.type === 'response.created');
  session.sendMessage(LONG_REPLY);
  const long = (await longCreated).response;
  const longDone = next((e) => e.type === 'response.done' && e.response.id === long.id);
  await next((e) => e.type === 'response.output_audio.delta' && e.response_id === long.id);
  await sleep(INTERRUPT_AFTER_MS);
  session.interrupt();
  await longDone;
  await sleep(500);

  await turn('second', () => session.sendMessage('Where did you stop?'));
  await sleep(500);
  write({ history: session.history });
  session.close();
}

main().then(() => process.exit(0), (error) => {
  write({ fatal: String(error?.stack ?? error) });
  process.exit(1);
});
