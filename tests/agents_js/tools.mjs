// The OpenAI Agents JS SDK's tool path against the demo server: a RealtimeAgent with one
// function tool (`get_weather`, zod parameters), every other setting at the SDK's default.
//
// Usage: node tools.mjs WS_URL
// Steps: connect; sendMessage("What is the weather in Paris?"); the model (the server's LLM)
// calls get_weather; the SDK runs the tool itself and sends its output back (a
// function_call_output item and response.create); the script waits for the reply that follows
// (a response.done with a message). Output: session_log.mjs's records, {"history": [...]} at
// the end. Exit status 0 once the reply came; 1 on a timeout or a failed connect.
import { RealtimeAgent, RealtimeSession, tool } from '@openai/agents-realtime';
import { z } from 'zod';
import { logSession, next, write } from './session_log.mjs';

const [url] = process.argv.slice(2);
const getWeather = tool({
  name: 'get_weather',
  description: 'The weather forecast for a city.',
  parameters: z.object({ city: z.string() }),
  execute: async ({ city }) => `Sunny and 21 degrees in ${city}.`,
});
const session = logSession(new RealtimeSession(new RealtimeAgent({
  name: 'Assistant',
  instructions: 'You are a helpful voice assistant. Use your tools.',
  tools: [getWeather],
}), { transport: 'websocket' }));

async function main() {
  write({ step: 'connect' });
  const updated = next((e) => e.type === 'session.updated');
  await session.connect({ apiKey: 'not-needed-on-loopback', url });
  await updated;
  write({ step: 'tool' });
  const answered = next((e) => e.type === 'response.done'
    && e.response.output.some((item) => item.type === 'message'
      && item.content.some((part) => part.transcript)));
  session.sendMessage('What is the weather in Paris?');
  await answered;
  await new Promise((resolve) => setTimeout(resolve, 500));
  write({ history: session.history });
  session.close();
}

main().then(() => process.exit(0), (error) => {
  write({ fatal: String(error?.stack ?? error) });
  process.exit(1);
});
