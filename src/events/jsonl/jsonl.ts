/**
 * The JSONL interchange format: one event a line, streamed in both directions so that logs of
 * millions of events are never held in memory whole.
 */
import { createReadStream, createWriteStream } from 'node:fs';
import { once } from 'node:events';
import type { Readable, Writable } from 'node:stream';
import { decodeEvent, SeqOrder } from '../decode.js';
import type { StoredEvent } from '../types.js';

/** An event read from a JSONL file, with its exact text and its 1-based line number. */
export interface JsonlEvent extends StoredEvent {
  readonly line: number;
}

/**
 * Streams the events of a JSONL file (a path or a readable stream), validating each and checking
 * that seqs run without gaps. Whitespace-only lines are skipped; anything else that is not a valid
 * event throws `InvalidEventError` naming the line, the seq if known, and the field.
 */
export async function* readJsonl(source: string | Readable): AsyncGenerator<JsonlEvent> {
  const input =
    typeof source === 'string' ? createReadStream(source, { highWaterMark: 1 << 20 }) : source;
  input.setEncoding('utf8');
  const order = new SeqOrder();
  let line = 0;
  let rest = '';
  const decode = (raw: string): JsonlEvent | undefined => {
    line += 1;
    const text = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    if (text.trim() === '') return undefined;
    const event = decodeEvent(text, { line });
    order.accept(event, { line });
    return { event, text, line };
  };
  try {
    // Lines are split by hand: readline costs several times more per line on logs of millions.
    for await (const chunk of input as AsyncIterable<string>) {
      const text = rest === '' ? chunk : rest + chunk;
      let start = 0;
      let end = text.indexOf('\n', start);
      while (end !== -1) {
        const event = decode(text.slice(start, end));
        if (event) yield event;
        start = end + 1;
        end = text.indexOf('\n', start);
      }
      rest = text.slice(start);
    }
    if (rest !== '') {
      const event = decode(rest);
      if (event) yield event;
    }
  } finally {
    if (typeof source === 'string') input.destroy();
  }
}

/**
 * Writes events (or their texts) as JSONL to a path or a writable stream, one line each, waiting
 * for the stream to drain so memory stays flat. Resolves once everything is written (and, for a
 * path, the file is closed).
 */
export async function writeJsonl(
  events: AsyncIterable<StoredEvent | string> | Iterable<StoredEvent | string>,
  destination: string | Writable,
): Promise<number> {
  const output = typeof destination === 'string' ? createWriteStream(destination) : destination;
  let count = 0;
  try {
    for await (const item of events) {
      const text = typeof item === 'string' ? item : item.text;
      if (!output.write(`${text}\n`)) await once(output, 'drain');
      count += 1;
    }
  } finally {
    if (typeof destination === 'string') {
      output.end();
      await once(output, 'finish');
    }
  }
  return count;
}
