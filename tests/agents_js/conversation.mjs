// One whole conversation of the OpenAI Agents JS SDK (`@openai/agents-realtime`) with the demo
// server, as a user of the SDK writes it: a RealtimeAgent in a RealtimeSession over the
// websocket transport, every setting at the SDK's default (its own session.update on connect:
// semantic_vad, noise_reduction null, tracing "auto", transcription, ...).
//
// Usage: node conversation.mjs WS_URL QUESTION_PCM [TOOL_PROMPT]
//   WS_URL        ws://127.0.0.1:PORT/v1/realtime
//   QUESTION_PCM  a spoken question: raw PCM16 LE mono at 24 kHz (the SDK's default input format)
//   TOOL_PROMPT   when given, the agent has a `get_weather` tool and a last text turn sends this
//                 prompt; the SDK runs the tool the model calls and sends its output back.
//
// Steps, in order (each waits for the server's `response.done` of its reply):
//   1. connect (the SDK's session setup);
//   2. text turn: sendMessage("say: It is sunny today."), its audio received;
//   3. spoken turn: sendAudio() of the question in 40 ms chunks at real time, then 1.5 s of
//      silence; the server's VAD ends the turn and answers;
//   4. interruption: sendMessage("say: <long reply>"), and 1.2 s after its first audio arrived
//      session.interrupt() (the SDK sends its own truncate at the elapsed time);
//   5. second turn: sendMessage("say: Where was I?");
//   6. with TOOL_PROMPT: the tool turn.
// Output on stdout, one JSON object a line: {"in": event} for every server event,
// {"out": event} for every client event the SDK sent, {"step": name} at each step's start,
// {"error": ...} for every session `error` the SDK raised, and {"history": [...]} (the SDK's
// own conversation history) at the end. Exit status 0 once every step ended; 1 on a timeout
// (STEP_TIMEOUT_MS) or a failed connect.
import { readFileSync } from 'node:fs';
import { RealtimeAgent, RealtimeSession, tool } from '@openai/agents-realtime';
import { WebSocket } from 'ws';
import { z } from 'zod';

const [url, questionPath, toolPrompt] = process.argv.slice(2);
const STEP_TIMEOUT_MS = 60_000;
const CHUNK_MS = 40;
const RATE_HZ = 24_000;
const INTERRUPT_AFTER_MS = 1200;
const LONG_REPLY = 'say: The first planet is Mercury, the smallest and the closest to the sun. '
  + 'Venus comes next, wrapped in thick clouds of acid. Then our own Earth, the only world we '
  + 'know with life. Mars is red and dusty, with the tallest volcano of all.';

const write = (record) => process.stdout.write(`${JSON.stringify(record)}\n`);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Observation only: every frame the SDK sends goes out unchanged and is also logged.
const send = WebSocket.prototype.send;
WebSocket.prototype.send = function logged(data, ...rest) {
  write({ out: JSON.parse(data.toString()) });
  return send.call(this, data, ...rest);
};

const getWeather = tool({
  name: 'get_weather',
  description: 'The weather forecast for a city.',
  parameters: z.object({ city: z.string() }),
  execute: async ({ city }) => `Sunny and 21 degrees in ${city}.`,
});
const agent = new RealtimeAgent({
  name: 'Assistant',
  instructions: 'You are a helpful voice assistant.',
  tools: toolPrompt ? [getWeather] : [],
});
const session = new RealtimeSession(agent, { transport: 'websocket' });
const events = [];
const waiters = [];
session.transport.on('*', (event) => {
  write({ in: event });
  events.push(event);
  for (const waiter of [...waiters]) {
    if (waiter.test(event)) {
      waiters.splice(waiters.indexOf(waiter), 1);
      waiter.resolve(event);
    }
  }
});
session.on('error', (error) => write({ error: String(error?.error ?? error) }));

function next(test) {
  return new Promise((resolve, reject) => {
    const waiter = { test, resolve };
    waiters.push(waiter);
    setTimeout(() => reject(new Error('timed out waiting for a server event')), STEP_TIMEOUT_MS);
  });
}

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
  await sleep(6000); // the reply plays out

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

  await turn('second', () => session.sendMessage('say: Where was I?'));
  await sleep(2000);

  if (toolPrompt) {
    write({ step: 'tool' });
    const toolOutput = next((e) => e.type === 'response.done'
      && e.response.output.some((item) => item.type === 'message'));
    session.sendMessage(toolPrompt);
    await toolOutput;
    await sleep(500);
  }
  write({ history: session.history });
  session.close();
}

main().then(() => process.exit(0), (error) => {
  write({ fatal: String(error?.stack ?? error) });
  process.exit(1);
});
