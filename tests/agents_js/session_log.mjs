// What the client scripts share: their JSON-lines log on stdout and waiting for server events.
//
// Records, one JSON object a line: {"in": event} for every server event the session's transport
// received, {"out": event} for every client event the SDK sent (the `ws` WebSocket's frames,
// observed: each goes out unchanged), {"step": name} (the scripts' own), {"error": message}
// for every `error` the session raised to the application, {"history": [...]} and
// {"fatal": message} (the scripts' own).
import { WebSocket } from 'ws';

export const STEP_TIMEOUT_MS = 120_000;
const waiters = [];

export const write = (record) => process.stdout.write(`${JSON.stringify(record)}\n`);

const send = WebSocket.prototype.send;
WebSocket.prototype.send = function logged(data, ...rest) {
  write({ out: JSON.parse(data.toString()) });
  return send.call(this, data, ...rest);
};

// Log `session`'s (a RealtimeSession) events and errors; returns it.
export function logSession(session) {
  session.transport.on('*', (event) => {
    write({ in: event });
    for (const waiter of [...waiters]) {
      if (waiter.test(event)) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve(event);
      }
    }
  });
  session.on('error', (error) => write({ error: String(error?.error?.message
    ?? error?.error ?? error) }));
  return session;
}

// The next server event for which `test(event)` holds (rejects after STEP_TIMEOUT_MS).
export function next(test) {
  return new Promise((resolve, reject) => {
    waiters.push({ test, resolve });
    setTimeout(() => reject(new Error('timed out waiting for a server event')), STEP_TIMEOUT_MS);
  });
}
