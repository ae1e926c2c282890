import { expect } from 'chai';
import { stripVTControlCharacters } from 'node:util';
import type { LogSource } from '../../replay/io/log-source.js';
import { progressFor } from '../../replay/io/progress.js';

const MiB = 1024 * 1024;

/** A log source that only has a size: all progressFor looks at. */
function sourceOf(unit: 'events' | 'bytes', total: number): LogSource {
  return {
    kind: unit === 'events' ? 'lmdb' : 'jsonl',
    path: 'fake',
    size: { unit, total },
    range: undefined,
    events: () => {
      throw new Error('not read');
    },
    stored: () => {
      throw new Error('not read');
    },
    batches: () => {
      throw new Error('not read');
    },
    snapshotAtOrBefore: () => undefined,
    locate: () => Promise.resolve(0),
    close: () => Promise.resolve(),
  };
}

/** A terminal that keeps what is written to it. */
function fakeTerminal(isTTY = true): { stream: NodeJS.WriteStream; text: () => string } {
  const written: string[] = [];
  const stream = {
    isTTY,
    columns: 200,
    write: (chunk: string) => {
      written.push(chunk);
      return true;
    },
  } as unknown as NodeJS.WriteStream;
  // The bar's text without the terminal's escape sequences.
  const text = () =>
    stripVTControlCharacters(written.join('')).replaceAll('\u001B7', '').replaceAll('\u001B8', '');
  return { stream, text };
}

describe('the replay progress bar', () => {
  it('counts MiB read for a JSONL log, whatever the event count', () => {
    const terminal = fakeTerminal();
    const progress = progressFor(sourceOf('bytes', 30 * MiB), terminal.stream);
    progress.bytes(25 * MiB);
    for (let i = 0; i < 20_000; i += 1) progress.event();
    progress.stop();
    expect(terminal.text()).to.contain('| 25/30 MiB |');
    expect(terminal.text()).to.not.contain('20000');
  });

  it('counts events for an LMDB log', () => {
    const terminal = fakeTerminal();
    const progress = progressFor(sourceOf('events', 200_000), terminal.stream);
    for (let i = 0; i < 20_000; i += 1) progress.event();
    progress.stop();
    expect(terminal.text()).to.contain('| 20000/200000 events |');
  });

  it('stays silent for a small log or a stream that is not a terminal', () => {
    for (const [source, terminal] of [
      [sourceOf('events', 99_999), fakeTerminal()],
      [sourceOf('bytes', 19 * MiB), fakeTerminal()],
      [sourceOf('events', 200_000), fakeTerminal(false)],
    ] as const) {
      const progress = progressFor(source, terminal.stream);
      progress.event();
      progress.bytes(1);
      progress.stop();
      expect(terminal.text()).to.equal('');
    }
  });
});
