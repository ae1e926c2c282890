/**
 * The admission queue end to end (docs/placement.md, "The admission queue"; docs/quotas.md): one
 * real cluster of 16 slots (the router, two workers of 8 container slots each, real sandboxes and
 * checkpoints) with `QUEUE_TIMEOUT` on, and two tenants, alpha and beta, each with its own token.
 * Every case waits for the log or the router to say what it needs, never for time to pass, and
 * ends with every slot free again for the next.
 */
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import type { ClusterEvent } from '../../src/events/types.js';
import { NeverFitsError, ReadieClient, type Session } from '../../src/client/index.js';
import { slotsHeldBy } from '../../src/core/admission/index.js';
import { applyInPlace, initialState } from '../../src/projections/index.js';
import { ROOM_REFRESH_MS } from '../../src/client/map-engine.js';
import { newToken } from '../../src/cluster/local-credentials.js';
import { tokenDigest } from '../../src/shared/bearer-token.js';
import { startE2eCluster, type E2eCluster } from '../support/e2e-cluster.js';
import { runReadie } from '../support/processes.js';
import { PYTHON } from '../support/python.js';
import { eventuallyAsync } from '../support/jetstream-routers.js';
import { eventually, finishedLog, ofType, readLog } from '../support/router/harness.js';

const SLOTS = 16;
/** Every call's budget: 16 of them fill the cluster's container slots (8 a worker), not its memory. */
const SMALL = { memory: '256MiB' };
const NAP = {
  source: 'import time\ndef nap(s):\n    time.sleep(s)\n    return s\n',
  function: 'nap',
};

describe('end to end: the admission queue on a real cluster of 16 slots', function () {
  this.timeout(120_000);
  let cluster: E2eCluster;
  let alpha: ReadieClient;
  let beta: ReadieClient;
  const tokens = { alpha: newToken(), beta: newToken() };

  before(async function () {
    this.timeout(180_000);
    cluster = await startE2eCluster({
      env: { QUEUE_TIMEOUT: '2m' },
      extraTokens: Object.entries(tokens)
        .map(([tenant, token]) => `tenant ${tenant} ${tokenDigest(token)}`)
        .join('\n'),
    });
    const client = (token: string) =>
      new ReadieClient({ address: `127.0.0.1:${cluster.routerPort}`, insecure: true, token });
    alpha = client(tokens.alpha);
    beta = client(tokens.beta);
  });

  after(async () => {
    alpha?.close();
    beta?.close();
    await cluster?.stop();
  });

  const log = () => readLog(cluster.logDir);
  const lastSeq = () => log().at(-1)?.seq ?? 0;
  const of = <T extends ClusterEvent['type']>(type: T, requestId: string, after = 0) =>
    ofType(log(), type).find(
      (event) => event.seq > after && 'requestId' in event && event.requestId === requestId,
    );
  const ms = (event: ClusterEvent) => Date.parse(event.at);

  /** `readie ARGS` against the cluster with the operator credential `readie up` left in its state dir. */
  async function readie(...args: string[]): Promise<string> {
    const child = runReadie([
      ...args,
      '--router',
      `127.0.0.1:${cluster.routerPort}`,
      '--insecure',
      '--state-dir',
      cluster.dir,
    ]);
    const { code } = await child.exited;
    const stdout = child.lines.join('\n');
    expect(code, `readie ${args.join(' ')}: ${child.stderr()}`).to.equal(0);
    return stdout;
  }

  interface QueueRow {
    tenantId: string;
    depth: number;
    slotsHeld: number;
    maxSlots?: number;
  }
  /** `readie status --json`'s admission queue, by tenant. */
  async function queueRows(): Promise<Map<string, QueueRow>> {
    const status = JSON.parse(await readie('status', '--json')) as { queue: QueueRow[] };
    return new Map(status.queue.map((row) => [row.tenantId, row]));
  }

  /** Every slot free: beta (holding none) may place 16 calls now. */
  const allSlotsFree = () =>
    eventuallyAsync(async () => (await beta.slots(SMALL)) === SLOTS, 'all 16 slots free', 60_000);

  /** Alpha's sessions a case opened; each case ends every one, whatever happened. */
  const opened: Session[] = [];
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((session) => session.close().catch(() => false)));
  });

  /** `count` sessions of alpha, each holding a container after one call. */
  async function holdSessions(count: number): Promise<Session[]> {
    const sessions = Array.from({ length: count }, () => alpha.session());
    opened.push(...sessions);
    await Promise.all(sessions.map((session) => session.call({ ...NAP, args: [0] }, SMALL)));
    return sessions;
  }

  it('waits when one tenant holds every slot, and runs as soon as one frees', async () => {
    await allSlotsFree();
    const sessions = await holdSessions(SLOTS);
    expect((await queueRows()).get('alpha')).to.deep.include({ slotsHeld: SLOTS, depth: 0 });

    const before = lastSeq();
    const call = beta.start<number>({ ...NAP, args: [0] }, SMALL);
    let settled = false;
    void call.result.finally(() => (settled = true)).catch(() => undefined);
    await eventually(
      () => of('CallQueued', call.requestId, before) !== undefined,
      "beta's call queued",
    );
    // The router shows it waiting, and alpha holding every slot.
    const rows = await queueRows();
    expect(rows.get('beta')).to.deep.include({ depth: 1, slotsHeld: 0 });
    expect(rows.get('alpha')).to.deep.include({ slotsHeld: SLOTS, depth: 0 });
    expect(settled, 'the call waits while no slot frees').to.equal(false);
    expect(of('CallAdmitted', call.requestId, before)).to.equal(undefined);
    // The call history lists it as queued, with why it waits.
    const waiting = JSON.parse(await readie('call', call.requestId, '--json')) as {
      state: string;
      queuedWhy: string;
      admittedAt?: string;
    };
    expect(waiting).to.include({ state: 'queued' });
    expect(waiting.queuedWhy).to.equal(of('CallQueued', call.requestId, before)!.why);
    expect(waiting.queuedWhy).not.to.equal('');
    expect(waiting.admittedAt ?? '').to.equal('');
    expect(await readie('calls', '--tenant', 'beta')).to.match(
      new RegExp(`${call.requestId}.*queued`),
    );

    // Alpha lets one session go: its container is removed, and on that beta's call is admitted.
    expect(await sessions[0]!.close()).to.equal(true);
    expect(await call.result).to.equal(0);
    await finishedLog(cluster.logDir, [call.requestId]);
    const events = log().filter((event) => event.seq > before);
    const ended = ofType(events, 'SessionEnded').find((e) => e.sessionId === sessions[0]!.id);
    const removed = ofType(events, 'ContainerStateChanged').filter((e) => e.state === 'removed');
    const admitted = of('CallAdmitted', call.requestId, before)!;
    expect(ended?.containerId, 'the session ended').to.be.a('string');
    expect(removed.map((e) => e.containerId)[0]).to.equal(ended!.containerId);
    expect(admitted.seq).to.be.greaterThan(removed[0]!.seq);
    // That removal was the only slot freed before the admission, and nothing was admitted first.
    expect(removed.filter((e) => e.seq < admitted.seq)).to.have.length(1);
    expect(ofType(events, 'CallAdmitted')[0]?.requestId).to.equal(call.requestId);
    expect(of('CallPlaced', call.requestId, before)!.seq).to.be.greaterThan(admitted.seq);
    // readie call tells the wait: requested, queued (why), admitted (after how long), placed.
    const page = await readie('call', call.requestId);
    const steps = page
      .slice(page.indexOf('steps'))
      .split('\n')
      .map((line) => line.trim().split(/\s+/)[0]);
    expect(steps).to.include.ordered.members([
      'steps',
      'requested',
      'queued',
      'admitted',
      'placed',
    ]);
    expect(page).to.match(/admitted .* after \S+ in the queue/);
    expect(page).to.match(/state +succeeded \(OK\)/);
  });

  it('with maxSlots 12 for alpha (readie quota set), its 13th session queues while beta runs at once', async () => {
    const set = await readie('quota', 'set', '--tenant', 'alpha', '--max-slots', '12');
    expect(set).to.match(
      /^set: tenant alpha -> weight 1, maxSlots 12, maxQueued 2000 \(quota revision \d+\)/,
    );
    try {
      await allSlotsFree();
      const sessions = await holdSessions(12);
      const before = lastSeq();
      const thirteenth = alpha.session();
      opened.push(thirteenth);
      const waiting = thirteenth.start<number>({ ...NAP, args: [0] }, SMALL);
      await eventually(
        () => of('CallQueued', waiting.requestId, before) !== undefined,
        "alpha's 13th session call queued",
      );
      expect(of('CallQueued', waiting.requestId, before)!.why).to.include('maxSlots 12');
      expect((await queueRows()).get('alpha')).to.deep.include({
        slotsHeld: 12,
        depth: 1,
        maxSlots: 12,
      });

      // Beta's call does not wait: placed on its request, never queued.
      const call = beta.start<number>({ ...NAP, args: [0] }, SMALL);
      expect(await call.result).to.equal(0);
      await finishedLog(cluster.logDir, [call.requestId]);
      expect(of('CallQueued', call.requestId, before)).to.equal(undefined);
      expect(of('CallPlaced', call.requestId, before)?.cause).to.equal(`call:${call.requestId}`);
      // Alpha's 13th still waits for its cap, though four slots are free.
      expect(of('CallAdmitted', waiting.requestId, before)).to.equal(undefined);

      // One of alpha's sessions ends: it holds 11, and its 13th runs.
      expect(await sessions[0]!.close()).to.equal(true);
      expect(await waiting.result).to.equal(0);
      const ended = ofType(log(), 'SessionEnded').find((e) => e.sessionId === sessions[0]!.id)!;
      expect(of('CallAdmitted', waiting.requestId, before)!.seq).to.be.greaterThan(ended.seq);
    } finally {
      await readie('quota', 'remove', '--tenant', 'alpha');
    }
  });

  it("beta's single calls wait at most alpha's next Slots ask and one of its batches while alpha maps 3,000 sleeping inputs", async () => {
    await allSlotsFree();
    const before = lastSeq();
    // 3,000 inputs of 10 ms in batches of 25 (0.25 s of work each): 120 batches for 16 slots; the
    // map opens a session on every free slot and runs its batches in them one after another
    // (enough of them that most run after the map heard, at its next Slots ask, that beta waits).
    const inputs = Array.from({ length: 3000 }, () => 0.01);
    let mapped = false;
    const mapping = (async () => {
      let count = 0;
      try {
        const options = { ...SMALL, chunkSize: 25, progress: false };
        for await (const result of alpha.map<number>(NAP, inputs, options)) {
          if (result === 0.01) count += 1;
        }
      } finally {
        mapped = true;
      }
      return count;
    })();
    const requestsOf = (tenant: string) =>
      new Set(
        ofType(log(), 'CallRequested')
          .filter((e) => e.seq > before && e.tenantId === tenant)
          .map((e) => e.requestId),
      );
    // Beta starts once every slot is alpha's.
    await eventually(
      () =>
        ofType(log(), 'CallPlaced').filter((e) => requestsOf('alpha').has(e.requestId)).length >=
        SLOTS,
      "alpha's batches on every slot",
      60_000,
    );
    // Beta's single calls, two at a time, one after another while alpha's map runs (a refusal
    // before the call started is tried again, as the clients do: spawn).
    let calls = 0;
    const calling = async () => {
      while (!mapped) {
        expect(await beta.spawn<number>({ ...NAP, args: [0] }, SMALL).get()).to.equal(0);
        calls += 1;
      }
    };
    await Promise.all([calling(), calling()]);
    expect(await mapping).to.equal(3000);
    // A call ends before its events commit: wait for every call of beta's to be finished on disk.
    await eventually(() => {
      const betaCalls = requestsOf('beta');
      return (
        ofType(log(), 'CallFinished').filter((e) => betaCalls.has(e.requestId)).length >= calls
      );
    }, "beta's calls finished on disk");
    const events = log().filter((event) => event.seq > before);
    const alphaCalls = requestsOf('alpha');
    const betaCalls = requestsOf('beta');
    expect(betaCalls.size).to.be.at.least(calls);

    // How long each of alpha's batches held its slot: from its placement to its container's
    // removal (when the router counts the slot free again). While other tenants' calls wait (the
    // map hears of them when it asks Slots again), each batch runs in a session of its own whose
    // container goes after it; a container that ran several (before the map heard, or as it
    // ends, with nothing waiting) is not counted.
    const bound = ofType(events, 'CallBound').filter((e) => alphaCalls.has(e.requestId));
    const runs = new Map<string, number>();
    for (const e of bound) runs.set(e.containerId, (runs.get(e.containerId) ?? 0) + 1);
    const holds = bound
      .filter((e) => runs.get(e.containerId) === 1)
      .map((bound) => {
        const placed = of('CallPlaced', bound.requestId, before)!;
        const removed = ofType(events, 'ContainerStateChanged').find(
          (e) => e.containerId === bound.containerId && e.state === 'removed',
        );
        return removed === undefined ? 0 : ms(removed) - ms(placed);
      });
    const longestHold = Math.max(...holds);
    expect(holds.length).to.be.at.least(SLOTS);

    // Fair order, checked against the state each admission was decided on: a batch of alpha's
    // admitted while a call of beta's waited went first only because alpha then held no more
    // slots than beta (a tie goes to alpha, the lower tenant ID). That happens while alpha's
    // ended sessions' containers are being removed: each still takes its slot, but counts in no
    // tenant's slots held.
    let state = initialState();
    const overtaking: { seq: number; alpha: number; beta: number }[] = [];
    for (const event of log()) {
      if (event.type === 'CallAdmitted' && alphaCalls.has(event.requestId)) {
        const betaWaits = [...state.queue.values()].some((queued) => queued.tenantId === 'beta');
        const held = { alpha: slotsHeldBy(state, 'alpha'), beta: slotsHeldBy(state, 'beta') };
        if (betaWaits && held.alpha > held.beta) overtaking.push({ seq: event.seq, ...held });
      }
      state = applyInPlace(state, event);
    }
    expect(overtaking, "alpha's batches admitted ahead of beta's with more slots").to.deep.equal(
      [],
    );

    // Each of beta's calls that waited was admitted within the map's next ask of Slots (when it
    // hears that beta waits) and one of alpha's batches (beta's second call waits for a second
    // slot: each of the 16 batches in flight then frees its slot within the longest hold).
    const waits = ofType(events, 'CallQueued')
      .filter((queued) => betaCalls.has(queued.requestId))
      .map((queued) => ms(of('CallAdmitted', queued.requestId, before)!) - ms(queued));
    expect(waits.length, "beta's calls that waited").to.be.at.least(2);
    expect(Math.max(...waits)).to.be.at.most(ROOM_REFRESH_MS + longestHold);
    console.log(
      `      beta waited ${JSON.stringify(waits)} ms; alpha's longest batch held its slot ${longestHold} ms`,
    );
  });

  it('a call that can never fit (100GiB) is refused at once, naming the largest offer, in both clients', async () => {
    const before = lastSeq();
    const offer = /the largest worker offers \d+(\.\d+)?[MG]iB of memory; this call asks 100GiB/;
    const failed = await beta
      .spawn({ ...NAP, args: [0] }, { memory: '100GiB' })
      .get()
      .catch((error: unknown) => error);
    expect(failed).to.be.instanceOf(NeverFitsError);
    expect((failed as NeverFitsError).message).to.match(offer);
    const script = [
      'import readie',
      '@readie.remote(memory="100GiB")',
      'def f(x):',
      '    return x',
      'try:',
      '    f.spawn(1).get()',
      'except readie.NeverFitsError as e:',
      '    print(type(e).__name__, e.not_started, str(e))',
    ].join('\n');
    const output = await new Promise<string>((resolve, reject) =>
      execFile(
        PYTHON,
        ['-c', script],
        {
          env: cluster.clientEnv({
            READIE_ADDRESS: `127.0.0.1:${cluster.routerPort}`,
            READIE_INSECURE: '1',
            READIE_CA_FILE: '',
            READIE_AUTH_TOKEN: tokens.beta,
          }),
        },
        (error, stdout, stderr) => (error ? reject(new Error(stderr)) : resolve(stdout)),
      ),
    );
    expect(output)
      .to.match(/^NeverFitsError True /)
      .and.to.match(offer);
    // One request per client, each refused on its arrival: never queued, never tried again.
    // A refusal is answered before its events commit: wait for both on disk.
    await eventually(
      () => ofType(log(), 'CallRejected').filter((e) => e.seq > before).length >= 2,
      'both refusals on disk',
    );
    const events = log().filter((event) => event.seq > before);
    const requested = ofType(events, 'CallRequested');
    expect(requested).to.have.length(2);
    for (const request of requested) {
      const story = events.filter((e) => 'requestId' in e && e.requestId === request.requestId);
      expect(story.map((e) => e.type)).to.deep.equal(['CallRequested', 'CallRejected']);
      expect(story[1]!.seq).to.equal(request.seq + 1);
    }
  });
});
