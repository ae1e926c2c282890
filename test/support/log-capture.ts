/** A pino destination that keeps every line, for tests that read what a process logged. */
import { Writable } from 'node:stream';

/** The captured log: its stream (give it to the logger), its text and its parsed lines. */
export interface LogCapture {
  readonly stream: Writable;
  lines(): Record<string, unknown>[];
  text(): string;
}

/** A new capture. */
export function captureLog(): LogCapture {
  let text = '';
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      text += chunk.toString();
      done();
    },
  });
  return {
    stream,
    text: () => text,
    lines: () =>
      text
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => JSON.parse(line) as Record<string, unknown>),
  };
}
