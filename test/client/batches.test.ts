/** The TypeScript client's map in batches, against a scripted ProxyService on loopback. */
import { status as Status } from '@grpc/grpc-js';
import { expect } from 'chai';
import {
  CallCancelledError,
  InputEncodingError,
  ReadieClient,
  ReadieError,
  RemoteExecutionError,
  type RemoteLogLine,
} from '../../src/client/index.js';
import {
  BatchSizer,
  GROWTH,
  OutcomeReader,
  SAMPLES_TO_GROW,
  WARM_WAIT_SECONDS,
} from '../../src/client/batches.js';
import { FakeProxy, LogSource, type ScriptedCall } from '../support/fake-proxy.js';

/** One outcome record holding a whole JSON envelope. */
function record(index: number, envelope: unknown, micros = 5): Buffer {
  const data = Buffer.from(JSON.stringify(envelope), 'utf8');
  const ok = (envelope as { ok: boolean }).ok;
  const head = Buffer.alloc(13);
  head.writeUInt32BE(index, 0);
  head[4] = (ok ? 1 : 0) | 2;
  head.writeUInt32BE(micros, 5);
  head.writeUInt32BE(data.length, 9);
  return Buffer.concat([head, data]);
}

interface BatchRequest {
  inputs: number[][];
  kwargs: Record<string, unknown>;
}

/** Runs a batch here: `value(n)` for each input (an error envelope when it throws). */
function answer(call: ScriptedCall, upTo = Infinity, micros = 5, from = 0): void {
  const { inputs } = JSON.parse(call.payload.toString('utf8')) as BatchRequest;
  inputs.forEach(([n], index) => {
    if (index < from || index >= upTo) return;
    call.inputLog(index, LogSource.LOG_SOURCE_STDOUT, `doubling ${n}`);
    const envelope =
      n === 13
        ? {
            ok: false,
            error: { type: 'ValueError', module: 'builtins', message: 'thirteen', traceback: '' },
          }
        : { ok: true, value: n! * 2 };
    call.chunk(record(index, envelope, micros));
  });
}

async function collect<T>(results: AsyncIterable<T>): Promise<T[]> {
  const all: T[] = [];
  for await (const result of results) all.push(result);
  return all;
}

const FN = { source: 'def double(n):\n    return n * 2\n', function: 'double' };

describe('TypeScript client: a map in batches', function () {
  this.timeout(30_000);
  let proxy: FakeProxy;
  let client: ReadieClient;
  before(async () => {
    proxy = await FakeProxy.start();
  });
  after(async () => {
    await proxy.stop();
  });
  beforeEach(() => {
    proxy.calls.length = 0;
    proxy.script = async (call) => {
      await call.read();
      answer(call);
      call.end();
    };
    client = new ReadieClient({ address: proxy.address, insecure: true, env: {} });
  });
  afterEach(() => client.close());

  const sizes = () => proxy.calls.map((call) => call.config?.inputs ?? 0);

  it('sends many inputs in few calls and gives each its own result, in order', async () => {
    const lines: RemoteLogLine[] = [];
    const results = await collect(
      client.map(
        FN,
        Array.from({ length: 300 }, (_, n) => n),
        {
          maxConcurrency: 4,
          returnExceptions: true,
          progress: false,
          onLog: (line) => lines.push(line),
        },
      ),
    );
    expect(results.filter((_, n) => n !== 13)).to.deep.equal(
      Array.from({ length: 300 }, (_, n) => n * 2).filter((_, n) => n !== 13),
    );
    const failed = results[13] as RemoteExecutionError;
    expect(failed).to.be.instanceOf(RemoteExecutionError);
    expect(failed.inputIndex).to.equal(13);
    expect(failed.message).to.match(/^input 13: /);
    expect(sizes().reduce((a, b) => a + b, 0)).to.equal(300);
    expect(sizes().length).to.be.below(60);
    expect(sizes().slice(0, 4)).to.deep.equal([1, 1, 1, 1]);
    expect(proxy.calls[0]?.request()).to.include({ function: 'double' });
    expect(JSON.parse(proxy.calls[0]!.payload.toString('utf8'))).to.have.property('inputs');
    expect(lines.filter((line) => line.input !== undefined)).to.have.length(300);
  });

  it("a later map of the function starts from the inputs' times the last one measured", async () => {
    const options = { maxConcurrency: 4, returnExceptions: true, progress: false };
    const inputs = Array.from({ length: 300 }, (_, n) => n);
    await collect(client.map(FN, inputs, options));
    const first = sizes();
    proxy.calls.length = 0;
    await collect(client.map(FN, inputs, options));
    const later = sizes();
    expect(later.reduce((a, b) => a + b, 0)).to.equal(300);
    expect(first.slice(0, 4)).to.deep.equal([1, 1, 1, 1]);
    // Its inputs are known fast: no batch of one to measure them first.
    expect(Math.min(...later.slice(0, 4))).to.be.above(1);
    expect(later.length).to.be.below(first.length);
    // Another function's first map measures its own.
    proxy.calls.length = 0;
    const other = { source: 'def other(n):\n    return n\n', function: 'other' };
    await collect(client.map(other, inputs.slice(0, 8), options));
    expect(sizes().slice(0, 4)).to.deep.equal([1, 1, 1, 1]);
  });

  it('chunkSize fixes the batch size, maxInputs travels, and bad values are refused', async () => {
    const results = await collect(
      client.map(
        FN,
        Array.from({ length: 12 }, (_, n) => n),
        {
          chunkSize: 5,
          maxConcurrency: 1,
          maxInputs: 4,
          progress: false,
        },
      ),
    );
    expect(results).to.deep.equal(Array.from({ length: 12 }, (_, n) => n * 2));
    expect(sizes()).to.deep.equal([5, 5, 2]);
    expect(proxy.calls.every((call) => call.config?.maxInputs === 4)).to.equal(true);
    for (const options of [{ chunkSize: 0 }, { chunkSize: 1025 }, { maxInputs: 257 }]) {
      const error = await collect(client.map(FN, [1], options)).catch((e: unknown) => e);
      expect(error).to.be.instanceOf(RangeError);
    }
  });

  /**
   * Maps 12 inputs in batches of 5 on one slot, takes one result, then none while the first two
   * batches end: the window of 10 inputs drawn ahead of what was taken is full. A third call now
   * could carry one input only; it must wait for results to be taken instead (the wait for it
   * ends at 1 s, when none came, as it must not). Then takes the rest.
   */
  async function takeOneThenWait(): Promise<void> {
    const options = { chunkSize: 5, maxConcurrency: 1, progress: false };
    const inputs = Array.from({ length: 12 }, (_, n) => n);
    const outputs = client.map<number>(FN, inputs, options)[Symbol.asyncIterator]();
    try {
      const results: unknown[] = [(await outputs.next()).value];
      const until = Date.now() + 1_000;
      while (proxy.calls.length < 3 && Date.now() < until) {
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      expect(proxy.calls.length, 'a third call while the window was full').to.equal(2);
      for (let next = await outputs.next(); next.done !== true; next = await outputs.next()) {
        results.push(next.value);
      }
      expect(results).to.deep.equal(inputs.map((n) => n * 2));
      expect(sizes()).to.deep.equal([5, 5, 2]);
    } finally {
      // A failed check leaves the map half taken: ending it cancels its calls.
      await outputs.return?.();
    }
  }

  it('a slow consumer keeps the chunk size: the last batch waits for room in the window, not in pieces', async () => {
    await takeOneThenWait();
  });

  it('results count as taken when the caller takes them, not when they arrive together', async () => {
    // Each batch's outcomes in one chunk: five results arrive at once, of which the caller takes
    // one: one counts as taken, not five.
    proxy.script = async (call) => {
      await call.read();
      const { inputs } = JSON.parse(call.payload.toString('utf8')) as BatchRequest;
      call.chunk(
        Buffer.concat(inputs.map(([n], index) => record(index, { ok: true, value: n! * 2 }))),
      );
      call.end();
    };
    await takeOneThenWait();
  });

  it('a batch killed midway fails only the inputs it had not finished; retries run them again', async () => {
    let batches = 0;
    proxy.script = async (call) => {
      await call.read();
      batches += 1;
      if (batches > 1) {
        answer(call);
        return call.end();
      }
      answer(call, 2);
      call.fail(Status.RESOURCE_EXHAUSTED, 'the call ran out of memory (scripted)', {
        'readie-killed': 'out-of-memory',
        'readie-memory-budget': String(256 * 1024 * 1024),
      });
    };
    const results = await collect(
      client.map(FN, [0, 1, 2, 3, 4], { chunkSize: 5, returnExceptions: true, progress: false }),
    );
    expect(results.slice(0, 2)).to.deep.equal([0, 2]);
    for (const index of [2, 3, 4]) {
      const error = results[index] as ReadieError;
      expect(error).to.be.instanceOf(ReadieError);
      expect(error.inputIndex).to.equal(index);
      expect(error.message).to.match(new RegExp(`^input ${index}: `));
    }
    batches = 0;
    proxy.calls.length = 0;
    const retried = await collect(
      client.map(FN, [0, 1, 2, 3, 4], { chunkSize: 5, retries: 1, progress: false }),
    );
    expect(retried).to.deep.equal([0, 2, 4, 6, 8]);
    expect(sizes()).to.deep.equal([5, 3]);
  });

  it('an input whose arguments do not encode as JSON fails alone; its batch runs the others', async () => {
    const results = await collect(
      client.map(FN, [0, 1n, 2, 3], { chunkSize: 4, returnExceptions: true, progress: false }),
    );
    expect([results[0], results[2], results[3]]).to.deep.equal([0, 4, 6]);
    const failed = results[1] as InputEncodingError;
    expect(failed).to.be.instanceOf(InputEncodingError).and.to.be.instanceOf(TypeError);
    expect(failed.inputIndex).to.equal(1);
    expect(failed.message).to.match(/^input 1: its arguments do not encode as JSON: /);
    // One call, carrying the three inputs that encode.
    expect(sizes()).to.deep.equal([3]);
    expect(
      (JSON.parse(proxy.calls[0]!.payload.toString('utf8')) as BatchRequest).inputs,
    ).to.deep.equal([[0], [2], [3]]);
    // Without returnExceptions the map rejects with it, at its place.
    const error = await collect(client.map(FN, [0, 1n], { progress: false })).catch(
      (reason: unknown) => reason,
    );
    expect((error as { inputIndex?: number }).inputIndex).to.equal(1);
  });

  it('a batch refused before it started is waited out, all its inputs with it', async () => {
    let batches = 0;
    proxy.script = async (call) => {
      await call.read();
      batches += 1;
      if (batches === 1) {
        return call.fail(Status.RESOURCE_EXHAUSTED, 'no worker can accept this request', {
          'readie-not-started': '1',
        });
      }
      answer(call);
      call.end();
    };
    expect(
      await collect(client.map(FN, [1, 2, 3, 4], { chunkSize: 4, progress: false })),
    ).to.deep.equal([2, 4, 6, 8]);
    expect(sizes()).to.deep.equal([4, 4]);
  });

  it('aborting the signal mid-map cancels every batch on the server', async () => {
    proxy.script = async (call) => {
      await call.read();
      await call.cancelled;
    };
    const controller = new AbortController();
    const running = collect(
      client.map(
        FN,
        Array.from({ length: 10 }, (_, n) => n),
        {
          maxConcurrency: 3,
          signal: controller.signal,
          progress: false,
        },
      ),
    );
    while (proxy.calls.filter((call) => call.config !== undefined).length < 3) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    controller.abort();
    const error = await running.catch((e: unknown) => e);
    expect(error).to.be.instanceOf(CallCancelledError);
    expect((error as Error).message).to.equal(
      'the map of double was cancelled: 0 of 10 inputs completed, 3 calls in flight cancelled',
    );
    await Promise.all(proxy.calls.map((call) => call.cancelled));
  });

  describe('how much of the cluster a map uses (TenantService.Slots, scripted)', () => {
    afterEach(() => proxy.answerRooms());

    /**
     * Runs calls after `delayMs`, which their inputs' outcomes say they took (the map sizes its
     * slots by them); counts the most at once and each call's session. Calls of one session take
     * turns, as at the router (`overlapped`: calls that arrived while one of their session ran).
     * `refuse`, given a call and its session once its turn came (and how many other calls of that
     * session are not done: waiting their turn), may end the call itself instead. `perInput`:
     * each input takes `delayMs` and 1 ms more for each session seen before its own (its outcome
     * sent as it ends), not the whole call.
     */
    function recording(
      delayMs: number,
      refuse: (
        call: ScriptedCall,
        sessionId: string,
        others: () => number,
      ) => Promise<boolean> = () => Promise.resolve(false),
      perInput = false,
    ): { most: number; sessions: string[]; overlapped: number; inputs: number[] } {
      const seen = { most: 0, sessions: [] as string[], overlapped: 0, inputs: [] as number[] };
      let running = 0;
      // Per session: the end of its last call so far, and how many of its calls are not done.
      const turns = new Map<string, { last: Promise<void>; pending: number }>();
      proxy.script = async (call) => {
        await call.read();
        const sessionId = call.config?.sessionId ?? '';
        const turn = turns.get(sessionId) ?? { last: Promise.resolve(), pending: 0 };
        turns.set(sessionId, turn);
        let done = () => {};
        const mine = new Promise<void>((resolve) => (done = resolve));
        const before = turn.last;
        if (sessionId !== '') {
          if (turn.pending > 0) seen.overlapped += 1;
          turn.pending += 1;
          turn.last = before.then(() => mine);
          await before;
        }
        if (await refuse(call, sessionId, () => turn.pending - 1)) {
          if (sessionId !== '') turn.pending -= 1;
          return done();
        }
        seen.sessions.push(sessionId);
        seen.inputs.push(call.config?.inputs ?? 0);
        running += 1;
        seen.most = Math.max(seen.most, running);
        const count = perInput ? (call.config?.inputs ?? 1) : 1;
        const ms = perInput ? delayMs + [...new Set(seen.sessions)].indexOf(sessionId) : delayMs;
        for (let index = 0; index < count; index += 1) {
          await new Promise((resolve) => setTimeout(resolve, ms));
          if (perInput) answer(call, index + 1, delayMs * 1000, index);
        }
        running -= 1;
        if (!perInput) answer(call, Infinity, delayMs * 1000);
        call.end();
        if (sessionId !== '') turn.pending -= 1;
        done();
      };
      return seen;
    }

    const inputs = (count: number) => Array.from({ length: count }, (_, n) => n);

    it('opens sessions within the free slots even when the router queues, each kept', async () => {
      // Asked again, the router counts the map's own containers as held: none is free.
      proxy.answerRooms(
        { slots: 2, queueTimeoutMs: 60_000, maxQueued: 2000 },
        { slots: 0, queueTimeoutMs: 60_000, maxQueued: 2000 },
      );
      const seen = recording(20);
      const options = { chunkSize: 1, returnExceptions: true, progress: false };
      expect(await collect(client.map(FN, inputs(30), options))).to.have.length(30);
      expect(seen.most).to.equal(2);
      expect(new Set(seen.sessions).size).to.equal(2);
    });

    it('a slot sends its next batch while one runs, to wait for its turn', async () => {
      // The next batch waits for its session's turn where it is (the router), not a round trip
      // away in the client: the container starts it the moment the one before ends.
      proxy.answerRooms({ slots: 1 }, { slots: 0 });
      const seen = recording(50);
      const options = { chunkSize: 1, progress: false };
      const results = await collect(client.map<number>(FN, inputs(12), options));
      expect(results).to.deep.equal(inputs(12).map((n) => n * 2));
      expect(new Set(seen.sessions).size).to.equal(1);
      expect(seen.most).to.equal(1);
      // Once four inputs were measured (the map then knows how many slots its work wants), every
      // batch after the next can arrive while the one before it runs: 7 of the 12 (0 without; a
      // loaded machine may send one late, so at least 3 are asked).
      expect(seen.overlapped).to.be.at.least(3);
      // Other tenants' calls waiting: each batch gives its container back, and none waits.
      proxy.answerRooms({ slots: 1, othersWaiting: true }, { slots: 0, othersWaiting: true });
      const polite = recording(20);
      await collect(client.map(FN, inputs(8), options));
      expect(polite.overlapped).to.equal(0);
    });

    it('both batches of a slot failing on its dead session move it to one new session, not two', async () => {
      proxy.answerRooms({ slots: 1 }, { slots: 0 });
      // The slot's first session loses its container in its 8th call (which fails: it ran); the
      // call waiting its turn behind it is then refused before it starts (NOT_FOUND), as the
      // router refuses a call of a session whose container is gone.
      let turns = 0;
      let first: string | undefined;
      const failed: string[] = [];
      const seen = recording(30, async (call, sessionId, others) => {
        first ??= sessionId;
        if (sessionId !== first) return false;
        turns += 1;
        if (turns < 8) return false;
        if (turns === 8) {
          // It dies while it runs, once the slot's next call has arrived and waits its turn behind
          // it (at most 5 s: a slot that never sends early fails the test below).
          const until = Date.now() + 5_000;
          while (others() < 1 && Date.now() < until) {
            await new Promise((resolve) => setTimeout(resolve, 2));
          }
          failed.push('died');
          call.fail(Status.UNAVAILABLE, "the session's container died during the call");
        } else {
          failed.push('gone');
          call.fail(Status.NOT_FOUND, 'the session has expired', { 'readie-not-started': '1' });
        }
        return true;
      });
      const options = { chunkSize: 1, retries: 1, progress: false };
      const results = await collect(client.map<number>(FN, inputs(13), options));
      expect(results).to.deep.equal(inputs(13).map((n) => n * 2));
      // Both batches under way met the dead session (one at a time would prove nothing).
      expect(failed).to.deep.equal(['died', 'gone']);
      // Each moved the slot on only if it was still on the session that failed: one new session
      // (renewing twice would leave the two batches run again in two sessions, two containers).
      expect(new Set(seen.sessions).size, seen.sessions.join(' ')).to.equal(2);
    });

    it('a first call warming up in each new container opens no containers the work does not need', async () => {
      // 2,000 inputs of 10 us are 20 ms of work: the four first slots are plenty. Their first
      // inputs took 2 ms each (4 s of work, by them): slots follow the inputs that ran warm.
      proxy.answerRooms({ slots: 16 });
      const sessions: string[] = [];
      proxy.script = async (call) => {
        await call.read();
        const sessionId = call.config?.sessionId ?? '';
        const fresh = !sessions.includes(sessionId);
        sessions.push(sessionId);
        const { inputs } = JSON.parse(call.payload.toString('utf8')) as BatchRequest;
        inputs.forEach(([n], index) => {
          const micros = fresh && index === 0 ? 2000 : 10;
          call.chunk(record(index, { ok: true, value: n! * 2 }, micros));
        });
        call.end();
      };
      const results = await collect(client.map<number>(FN, inputs(2000), { progress: false }));
      expect(results).to.deep.equal(inputs(2000).map((n) => n * 2));
      expect(new Set(sessions).size).to.be.at.most(4);
    });

    it('isolated inputs may fill the queue as well', async () => {
      proxy.answerRooms(
        { slots: 2, queueTimeoutMs: 60_000, maxQueued: 2000 },
        { slots: 0, queueTimeoutMs: 60_000, maxQueued: 2000 },
      );
      const seen = recording(200);
      const options = { isolateInputs: true, returnExceptions: true, progress: false };
      expect(await collect(client.map(FN, inputs(12), options))).to.have.length(12);
      expect(seen.most).to.be.above(2);
    });

    /**
     * The most calls at once of a map of 40 inputs, one a call of 40 ms, when the router answers
     * `first` at its start and `later` when asked again.
     */
    async function mostRunning(first: { slots: number }, later: { slots: number }) {
      proxy.answerRooms(first, later);
      const seen = recording(40);
      const options = { chunkSize: 1, returnExceptions: true, progress: false };
      expect(await collect(client.map(FN, inputs(40), options))).to.have.length(40);
      return seen.most;
    }

    it('room freed after the start opens more slots', async () => {
      expect(await mostRunning({ slots: 1 }, { slots: 3 })).to.be.above(1);
    });

    it('inputs measured slow ask for room at once, not after the wait begun before', async () => {
      // Four slots are what the map wants at its start (ROOM_REFRESH_MS until it asks again);
      // its first inputs, measured at 40 ms, want more: it asks ROOM_REFRESH_WANTING_MS after
      // its start, while 400 ms of work are left for four.
      expect(await mostRunning({ slots: 4 }, { slots: 8 })).to.be.above(4);
    });

    it("a later map of slower inputs is not held to the earlier map's times", async () => {
      proxy.answerRooms({ slots: 8 });
      const options = { returnExceptions: true, progress: false };
      await collect(client.map(FN, inputs(100), options));
      // Inputs of 5 us before, of 100 ms now: the earlier times open one slot and would size its
      // first batch for all 32 inputs. Its first batch holds 4 at most, and once its first outcome
      // came only this map's own times count: more slots open.
      proxy.calls.length = 0;
      const seen = recording(100);
      expect(await collect(client.map(FN, inputs(32), options))).to.have.length(32);
      expect(proxy.calls[0]?.config?.inputs).to.be.at.most(4);
      expect(new Set(seen.sessions).size).to.be.above(2);
    });

    it("a later map's slot sends its next batch once the map measured its first inputs", async () => {
      // A later map's first batches hold 4 inputs (its earlier times are no promise): about 80 ms
      // here. Once 4 of its inputs were measured (each slot's first one, about 20 ms in), every
      // slot's next batch (the rest of its share) goes while its first runs, where none did when a
      // slot waited for its first batch to end (a loaded machine may send one late: 2 are asked).
      proxy.answerRooms({ slots: 8 });
      const options = { returnExceptions: true, progress: false };
      recording(20, undefined, true);
      await collect(client.map(FN, inputs(80), options));
      const seen = recording(20, undefined, true);
      expect(await collect(client.map(FN, inputs(80), options))).to.have.length(80);
      expect(seen.inputs.slice(0, 8)).to.deep.equal(Array.from({ length: 8 }, () => 4));
      // The same share for every slot (10): what a slot's first batch ran so far counts, so a slot
      // whose input ended a moment before it took its next batch takes no more.
      const held = new Map<string, number>();
      seen.sessions.forEach((session, index) => {
        held.set(session, (held.get(session) ?? 0) + seen.inputs[index]!);
      });
      expect([...held.values()], seen.sessions.join(' ')).to.deep.equal(
        Array.from({ length: 8 }, () => 10),
      );
      expect(seen.overlapped).to.be.at.least(2);
    });

    it('a map starting from earlier times sends no second batch before its first outcomes', async () => {
      // Room for 64 calls: the window of inputs drawn ahead (twice the room times the largest
      // batch) would let the second batch go at once.
      proxy.answerRooms({ slots: 64 });
      const options = { returnExceptions: true, progress: false };
      await collect(client.map(FN, inputs(300), options));
      // The second map knows its inputs' time, but not until its own first outcomes came: its
      // second batch (32 times the first's inputs) would delay its first result.
      let calls = 0;
      let arrived = () => {};
      const another = new Promise<boolean>((resolve) => (arrived = () => resolve(true)));
      let early: boolean | undefined;
      proxy.script = async (call) => {
        await call.read();
        calls += 1;
        if (calls === 1) {
          const late = new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 500));
          early = await Promise.race([another, late]);
        } else arrived();
        answer(call);
        call.end();
      };
      expect(await collect(client.map(FN, inputs(3000), options))).to.have.length(3000);
      expect(calls).to.be.above(1);
      expect(early).to.equal(false);
    });

    it("other tenants' calls waiting make each batch give its container back", async () => {
      // The router says so from the map's start: every batch runs in a session of its own.
      proxy.answerRooms({ slots: 1, othersWaiting: true });
      const seen = recording(10);
      const options = { chunkSize: 1, returnExceptions: true, progress: false };
      await collect(client.map(FN, inputs(20), options));
      expect(new Set(seen.sessions).size).to.equal(20);
      // Nobody waits: one session for the whole map (asked again, the router counts the map's
      // container as held: no more room, however long the map takes).
      proxy.answerRooms({ slots: 1, othersWaiting: false }, { slots: 0, othersWaiting: false });
      const alone = recording(10);
      await collect(client.map(FN, inputs(20), options));
      expect(new Set(alone.sessions).size).to.equal(1);
    });
  });

  it('many calls in flight at once (a router that queues lets a map have hundreds) warn of no listener leak', async () => {
    // The first 8 inputs are answered at once (measured, so the map opens all its slots); later
    // calls wait until 12 are open together.
    let held = 0;
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    proxy.script = async (call) => {
      await call.read();
      if (proxy.calls.length > 8) {
        held += 1;
        if (held >= 12) release();
        await gate;
      }
      answer(call);
      call.end();
    };
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on('warning', onWarning);
    try {
      // A generator: its length unknown, the map opens every slot it may once 8 were measured.
      const inputs = (function* () {
        for (let n = 100; n < 140; n += 1) yield n;
      })();
      const options = { chunkSize: 1, maxConcurrency: 20, progress: false };
      const results = await collect(client.map(FN, inputs, options));
      expect(results).to.deep.equal(Array.from({ length: 40 }, (_, n) => (100 + n) * 2));
      // A warning is emitted on a later tick.
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off('warning', onWarning);
    }
    expect(held).to.be.at.least(12);
    expect(warnings.map((warning) => warning.name)).to.not.include('MaxListenersExceededWarning');
  });
});

describe('TypeScript client: batch pieces', () => {
  it('reads outcome records, an outcome in several pieces, and refuses a malformed one', () => {
    const reader = new OutcomeReader(2);
    const whole = record(1, { ok: true, value: 7 }, 1500);
    const [outcome] = reader.feed(whole);
    expect(outcome).to.deep.include({ index: 1, ok: true, seconds: 0.0015 });
    expect(JSON.parse(outcome!.data.toString('utf8'))).to.deep.equal({ ok: true, value: 7 });
    const first = Buffer.from(whole);
    first[4] = 1; // not the last piece
    const pieces = new OutcomeReader(2);
    expect(pieces.feed(first)).to.deep.equal([]);
    expect(pieces.answered(1)).to.equal(false);
    expect(() => reader.feed(whole)).to.throw('malformed outcome record (input 1)');
    expect(() => new OutcomeReader(1).feed(record(3, { ok: true }))).to.throw('input 3');
    expect(() => new OutcomeReader(1).feed(whole.subarray(0, 10))).to.throw(
      'inside an outcome record',
    );
  });

  it("starts a sizer from an earlier map's times", () => {
    const times = { recent: [0.5], warm: [0.5] };
    expect(new BatchSizer(undefined, 1, times).estimate).to.equal(0.5);
  });

  it("counts an earlier map's times until this map measured an input of its own", () => {
    const earlier = new BatchSizer(undefined, 2);
    for (let i = 0; i < 64; i += 1) earlier.observe(1e-5);
    const sizer = new BatchSizer(undefined, 2, earlier.times());
    expect(sizer.estimate).to.equal(1e-5);
    expect(sizer.slotEstimate(4)).to.equal(1e-5);
    // Its first batches hold 4 rounds of what runs at once, not GROWTH times.
    expect(sizer.next(0, 10_000, 16)).to.equal(2 * SAMPLES_TO_GROW);
    sizer.observe(0.5);
    expect(sizer.estimate).to.equal(0.5);
    expect(sizer.slotEstimate(4)).to.equal(undefined);
    expect(new BatchSizer(undefined, 2, { recent: [], warm: [] }).estimate).to.equal(undefined);
  });

  it('opens slots by inputs that ran warm; small first inputs wait for them', () => {
    const sizer = new BatchSizer(undefined, 1);
    // Four first inputs of new containers, each paying a first call's warm-up (2 ms).
    for (let i = 0; i < 4; i += 1) sizer.observe(0.002, false);
    expect(sizer.slotEstimate(4)).to.equal(undefined);
    expect(sizer.estimate).to.equal(0.002);
    for (const seconds of [1e-5, 2e-5, 3e-5]) sizer.observe(seconds);
    expect(sizer.slotEstimate(4)).to.equal(undefined);
    sizer.observe(4e-5);
    expect(sizer.slotEstimate(4)).to.equal(3e-5);
    // First inputs of at least WARM_WAIT_SECONDS each: slots follow them at once.
    const slow = new BatchSizer(undefined, 1);
    for (const seconds of [0.05, 0.06, 0.05, 0.07]) slow.observe(seconds, false);
    expect(slow.slotEstimate(4)).to.equal(0.06);
    expect(WARM_WAIT_SECONDS).to.be.at.most(0.05);
  });

  it('sizes batches by the inputs measured time: growth, a slow input alone, shrinking shares', () => {
    const fresh = new BatchSizer(undefined, 1);
    expect(fresh.next(0, undefined, 4)).to.equal(1);
    fresh.observe(1e-6);
    // One fast first input is no promise: SAMPLES_TO_GROW are measured before a batch grows on it.
    expect(fresh.next(1, 10_000, 16)).to.equal(SAMPLES_TO_GROW);
    for (let i = 1; i < SAMPLES_TO_GROW; i += 1) fresh.observe(1e-6);
    expect(fresh.next(1, undefined, 4)).to.equal(GROWTH);
    expect(fresh.next(GROWTH, undefined, 4)).to.equal(1024);
    const slow = new BatchSizer(undefined, 1);
    slow.observe(2);
    expect(slow.next(100, undefined, 4)).to.equal(1);
    // A new slot once inputs were measured: by the estimate, at most GROWTH times one at once.
    expect(fresh.next(0, undefined, 4)).to.equal(GROWTH);
    const share = new BatchSizer(undefined, 1);
    for (const seconds of [0.004, 0.005, 0.006, 0.008]) share.observe(seconds);
    expect(share.uniform).to.equal(false);
    // 100 inputs left of 6 ms (the median) among 4 slots: half an even share (13), above the
    // floor of 8 (50 ms of them).
    expect(share.next(1024, 100, 4)).to.equal(13);
    // Near the end the shares shrink to the floor.
    expect(share.next(1024, 20, 4)).to.equal(8);
    expect(new BatchSizer(7, 1).next(1, 3, 16)).to.equal(3);
  });

  it('counts what the slots hold in a share, and a slot holding its own waits', () => {
    const sizer = new BatchSizer(undefined, 1);
    for (const seconds of [0.04, 0.05, 0.06, 0.08]) sizer.observe(seconds);
    // 96 inputs not given to any slot and 32 given, not finished, among 4 slots: half an even
    // share of the 128 is 16; a slot holding 10 of them takes 6 more.
    expect(sizer.next(10, 96, 4, 32, 0)).to.equal(16);
    expect(sizer.next(10, 96, 4, 32, 10)).to.equal(6);
    // Holding its share (or all but less than a batch worth its call), a slot waits (0); a slot
    // holding none takes at least that batch.
    expect(sizer.next(10, 96, 4, 32, 16)).to.equal(0);
    expect(sizer.next(10, 0, 4, 4, 0)).to.equal(1);
  });

  it('gives inputs of the same time their whole share, several run at once too', () => {
    const sizer = new BatchSizer(undefined, 1);
    for (const seconds of [0.1, 0.101, 0.1, 0.102]) sizer.observe(seconds);
    expect(sizer.uniform).to.equal(true);
    // 396 inputs of 100 ms among 16 slots: the whole even share (25), not half of it; a batch still
    // holds at most TARGET_BATCH_SECONDS of work (19 of 101 ms).
    expect(sizer.next(1, 396, 16)).to.equal(19);
    expect(sizer.next(1, 377, 16, 19, 19)).to.equal(6);
    expect(sizer.next(1, 371, 16, 25, 25)).to.equal(0);
    const eight = new BatchSizer(undefined, 8);
    for (const seconds of [0.05, 0.051, 0.05, 0.052]) eight.observe(seconds);
    // 400 inputs among 16 slots, 8 at once in each: 25 each (four rounds, the last of one input),
    // not 24 and 16 left over for a call of their own after them.
    expect(eight.next(8, 400, 16)).to.equal(25);
    expect(eight.next(8, 5, 16)).to.equal(5);
  });
});
