import { expect } from 'chai';
import { status } from '@grpc/grpc-js';
import { LogSource } from '../../src/proto/gen/readie/v1/call.js';
import {
  OUTCOME_RECORD_HEAD_BYTES,
  RecordFlag,
} from '../../src/worker/core/executor-link/outcomes.js';
import { cleanTempDirs } from '../support/temp.js';
import {
  execute,
  header,
  py,
  startHarness,
  type CallResult,
  type Harness,
} from '../support/worker-harness.js';

const MiB = 1024 * 1024;

/** A json-call batch: `source`'s `fn` over `inputs` (argument arrays). */
function jsonBatch(source: string, fn: string, inputs: unknown[][]): Buffer {
  return Buffer.from(JSON.stringify({ module: null, source, function: fn, inputs }));
}

interface Outcome {
  readonly ok: boolean;
  readonly envelope: { ok: boolean; value?: unknown; error?: { type: string; message: string } };
}

/** The outcomes a batch's chunks carry, by input; each chunk must hold whole records. */
function outcomesOf(result: CallResult): Map<number, Outcome> {
  const outcomes = new Map<number, Outcome>();
  const pieces = new Map<number, Buffer[]>();
  for (const { response } of result.responses) {
    if (response.message?.$case !== 'chunk') continue;
    const data = Buffer.from(response.message.value.data);
    let offset = 0;
    while (offset < data.length) {
      const index = data.readUInt32BE(offset);
      const flags = data[offset + 4]!;
      const length = data.readUInt32BE(offset + 9);
      offset += OUTCOME_RECORD_HEAD_BYTES;
      expect(offset + length, 'a chunk holds whole records').to.be.at.most(data.length);
      pieces.set(index, [...(pieces.get(index) ?? []), data.subarray(offset, offset + length)]);
      offset += length;
      if ((flags & RecordFlag.LAST) !== 0) {
        const text = Buffer.concat(pieces.get(index)!).toString('utf8');
        outcomes.set(index, {
          ok: (flags & RecordFlag.OK) !== 0,
          envelope: JSON.parse(text) as Outcome['envelope'],
        });
      }
    }
  }
  return outcomes;
}

describe('ExecutionService: batches (one call, many inputs)', function () {
  this.timeout(60_000);
  let harness: Harness;
  before(async () => {
    harness = await startHarness();
  });
  after(async () => {
    await harness?.stop();
    cleanTempDirs();
  });

  it("streams each input's outcome with its index, a failing input alone failing, lines tagged", async () => {
    const source = py`
      def check(n):
          print(f"checking {n}")
          if n == 7:
              raise ValueError(f"bad: {n}")
          return n * 2
    `;
    const inputs = Array.from({ length: 50 }, (_, n) => [n]);
    const result = await execute(
      harness.client,
      header({ inputs: 50 }),
      jsonBatch(source, 'check', inputs),
    );
    expect(result.code, result.details).to.equal(status.OK);
    const outcomes = outcomesOf(result);
    expect([...outcomes.keys()].sort((a, b) => a - b)).to.deep.equal(inputs.map(([n]) => n));
    for (const [index, outcome] of outcomes) {
      if (index === 7) {
        expect(outcome.ok).to.equal(false);
        expect(outcome.envelope.error).to.include({ type: 'ValueError', message: 'bad: 7' });
      } else expect(outcome.envelope).to.deep.equal({ ok: true, value: index * 2 });
    }
    // The router hears how many inputs raised in the trailers of the OK status.
    expect(result.trailers).to.include({ 'readie-inputs-raised': '1' });
    // Fast outcomes share chunks: far fewer answers than inputs.
    const chunks = result.responses.filter(({ response }) => response.message?.$case === 'chunk');
    expect(chunks.length).to.be.below(50);
    const lines = result.logs.filter((line) => line.source === LogSource.LOG_SOURCE_STDOUT);
    expect(lines.map((line) => [line.input, line.text])).to.deep.equal(
      inputs.map(([n]) => [n, `checking ${n}`]),
    );
  });

  it('runs max_inputs of a batch at once in one container', async () => {
    const source = py`
      import time
      def nap(n):
          started = time.monotonic()
          time.sleep(0.5)
          return [started, time.monotonic()]
    `;
    const result = await execute(
      harness.client,
      header({ inputs: 6, maxInputs: 6 }),
      jsonBatch(
        source,
        'nap',
        Array.from({ length: 6 }, (_, n) => [n]),
      ),
    );
    expect(result.code, result.details).to.equal(status.OK);
    const spans = [...outcomesOf(result).values()].map((o) => o.envelope.value as number[]);
    expect(spans).to.have.length(6);
    // Every input started before any of them ended: all six ran at once.
    expect(Math.max(...spans.map(([start]) => start!))).to.be.below(
      Math.min(...spans.map(([, end]) => end!)),
    );
  });

  it('a batch whose container is OOM-killed fails the call with what it finished already sent', async () => {
    const source = py`
      def step(n):
          if n == 3:
              blocks = []
              for _ in range(64):
                  blocks.append(b"x" * (16 * 1024 * 1024))
          return n
    `;
    const result = await execute(
      harness.client,
      header({ inputs: 6, memory: 128 * MiB }),
      jsonBatch(
        source,
        'step',
        Array.from({ length: 6 }, (_, n) => [n]),
      ),
    );
    expect(result.code).to.equal(status.RESOURCE_EXHAUSTED);
    expect(result.trailers).to.include({ 'readie-killed': 'out-of-memory' });
    const outcomes = outcomesOf(result);
    expect([...outcomes.keys()]).to.deep.equal([0, 1, 2]);
    expect([...outcomes.values()].map((o) => o.envelope.value)).to.deep.equal([0, 1, 2]);
  });

  it('a hostile function that forges an outcome for an input outside its batch ends the call', async () => {
    const source = py`
      import gc, struct
      def forge(n):
          writer = next(o for o in gc.get_objects() if type(o).__name__ == "FrameWriter")
          record = struct.pack(">IBII", 9999, 3, 0, 2) + b"{}"
          writer.send(struct.pack(">IB", len(record) + 1, 0x0B) + record)
          return n
    `;
    const result = await execute(
      harness.client,
      header({ inputs: 2 }),
      jsonBatch(source, 'forge', [[0], [1]]),
    );
    expect(result.code).to.equal(status.UNAVAILABLE);
    expect(result.details).to.include('names input 9999 of a batch of 2 inputs');
    expect(outcomesOf(result).size).to.equal(0);
  });

  it('refuses a header with more inputs than a batch may carry', async () => {
    const result = await execute(
      harness.client,
      header({ inputs: 1025 }),
      jsonBatch('def f(x):\n    return x\n', 'f', []),
    );
    expect(result.code).to.equal(status.INVALID_ARGUMENT);
    expect(result.details).to.include('a batch carries at most 1024 inputs');
  });
});
