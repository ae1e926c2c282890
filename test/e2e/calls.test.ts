/**
 * The call history and calls' output on a real router (in-process, tokens auth, LMDB log) and a
 * real worker (sandboxed Python containers): a failed call, a session's calls, a call whose client
 * left and a re-placed call, each told right by `readie call`, `readie logs` and `replay explain`,
 * and two tenants that never see each other's calls or output.
 */
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  NotFoundError,
  ReadieClient,
  ReadieError,
  RemoteExecutionError,
  SessionExpiredError,
} from '../../src/client/index.js';
import type { CallView } from '../../src/proto/gen/readie/v1/history.js';
import { LogSource } from '../../src/proto/gen/readie/v1/call.js';
import { tokenDigest } from '../../src/shared/bearer-token.js';
import { runReadie } from '../support/processes.js';
import { PYTHON } from '../support/python.js';
import { replayCli, ROOT } from '../support/replay.js';
import {
  eventually,
  settledLog,
  startTestRouter,
  type TestRouter,
} from '../support/router/harness.js';
import { ScriptedWorker } from '../support/router/scripted-worker.js';
import type { ScriptedRouter } from '../support/scripted-router.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';
import { startHarness, type Harness } from '../support/worker-harness.js';

const TENANT_A = 'tenant-a-token-for-history-0123456789';
const TENANT_B = 'tenant-b-token-for-history-0123456789';
const OPERATOR = 'operator-token-for-history-0123456789';
const WORKER = 'worker-token-for-history-0123456789';
const GONE = 'worker-gone-token-for-history-0123456789';
const ROUTER = 'router-token-for-history-0123456789';

/** A file holding `text`, 0600, in `dir`. */
function secret(dir: string, name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, `${text}\n`, { mode: 0o600 });
  return path;
}

const DIES = {
  source:
    'import os, sys, time\ndef dies():\n    print("line one", flush=True)\n    print("to stderr \\x1b[31m red", file=sys.stderr, flush=True)\n    time.sleep(0.5)\n    os._exit(3)\n',
  function: 'dies',
};
const SLOW_PRINTER = {
  source:
    'import time\ndef printer():\n    for i in range(40):\n        print(f"tick {i}", flush=True)\n        time.sleep(0.1)\n    return "done"\n',
  function: 'printer',
};
const KEEP = {
  source: 'def keep(x):\n    global KEPT\n    KEPT = x\n    print("kept", x)\n    return x\n',
  function: 'keep',
};
const READ = { source: 'def read():\n    return KEPT\n', function: 'read' };
const RAISES = {
  source:
    'def check(n):\n    print("checking", n)\n    if n < 0:\n        raise ValueError(f"n must be positive, got {n}\\nsecond line")\n    return n\n',
  function: 'check',
};

describe('the call history and calls output, end to end', function () {
  this.timeout(180_000);
  let test: TestRouter;
  let harness: Harness;
  let operatorFile: string;
  let tenantA: ReadieClient;
  let tenantB: ReadieClient;
  let workerStopped = false;
  // How far ahead of the wall clock the worker's and the router's clocks run: the last test moves
  // them past OUTPUT_RETENTION and WORKER_TTL instead of waiting.
  const workerAhead = { ms: 0 };
  const routerAhead = { ms: 0 };

  before(async () => {
    const dir = tempDir('readie-history-');
    test = await startTestRouter({
      auth: {
        mode: 'tokens',
        tokensFile: secret(
          dir,
          'tokens',
          [
            `tenant tenant-a ${TENANT_A}`,
            `tenant tenant-b ${TENANT_B}`,
            `operator ops ${OPERATOR}`,
            `worker hist-w1 ${WORKER}`,
            `worker a-gone ${GONE}`,
          ].join('\n'),
        ),
        routerTokenFile: secret(dir, 'router.token', ROUTER),
      },
      // The reaper passes often, so a worker gone silent is evicted as soon as the clock says.
      config: { REAPER_INTERVAL: 500 },
      clock: () => Date.now() + routerAhead.ms,
    });
    operatorFile = secret(dir, 'operator.token', OPERATOR);
    harness = await startHarness({
      router: { address: test.address } as ScriptedRouter,
      flags: {
        id: 'hist-w1',
        auth: 'tokens',
        tokenFile: secret(dir, 'worker.token', WORKER),
        routerTokenFile: secret(dir, 'router.sha256', tokenDigest(ROUTER)),
      },
      tuning: { clock: () => Date.now() + workerAhead.ms },
    });
    await eventually(() => test.router.state.workers.size === 1, 'the worker registered');
    tenantA = new ReadieClient({ address: test.address, insecure: true, token: TENANT_A });
    tenantB = new ReadieClient({ address: test.address, insecure: true, token: TENANT_B });
  });

  after(async () => {
    tenantA?.close();
    tenantB?.close();
    if (!workerStopped) await harness?.stop();
    await test?.close();
    cleanTempDirs();
  });

  /** `readie ARGS` against the router with the operator's token: exit code, stdout, stderr. */
  async function readie(
    ...args: string[]
  ): Promise<{ code: number | null; out: string; err: string }> {
    const child = runReadie([
      ...args,
      '--router',
      test.address,
      '--insecure',
      '--token-file',
      operatorFile,
    ]);
    const { code } = await child.exited;
    return { code, out: child.lines.join('\n'), err: child.stderr() };
  }

  async function callJson(requestId: string): Promise<CallView> {
    const answer = await readie('call', requestId, '--json');
    expect(answer.code, answer.err).to.equal(0);
    return JSON.parse(answer.out) as CallView;
  }

  it('a failed call: readie call tells its code and message, readie logs its output (escaped), replay explain its placement', async () => {
    const running = tenantA.start({ ...DIES, args: [] });
    const failure = await running.result.then(
      () => null,
      (error: unknown) => error,
    );
    expect(failure).to.be.instanceOf(ReadieError);
    const requestId = running.requestId;

    const call = await callJson(requestId);
    expect(call).to.include({
      requestId,
      tenantId: 'tenant-a',
      function: 'dies',
      state: 'failed',
      code: 'UNAVAILABLE',
      workerId: 'hist-w1',
    });
    expect(call.message).to.match(/executor|exit/);
    expect(call.finishedAt).to.not.equal('');
    expect(call.durationMs).to.be.a('number');

    const page = await readie('call', requestId);
    expect(page.out).to.match(/state\s+failed \(UNAVAILABLE\)/);
    expect(page.out).to.match(/placed\s+\S+\s+\+\S+\s+worker hist-w1/);

    const logs = await readie('logs', requestId);
    expect(logs.code, logs.err).to.equal(0);
    expect(logs.out).to.include('line one');
    // The escape sequence the function printed is shown, not obeyed.
    expect(logs.out).to.include('[stderr] to stderr \\x1b[31m red');
    expect(logs.out).to.not.include('\x1b');
    expect(logs.out).to.match(/\[readie\] call failed after \d+ ms: UNAVAILABLE/);

    // The call ended before its events committed: replay reads them once on disk.
    await settledLog(test);
    const explained = replayCli('explain', test.logDir, requestId);
    expect(explained.status, explained.stderr).to.equal(0);
    expect(explained.stdout).to.include(requestId);
    expect(explained.stdout).to.include('hist-w1');
    // Every step, to its end with its code and duration.
    expect(explained.stdout).to.match(/Lifecycle:\n/);
    expect(explained.stdout).to.match(/\nbound\s+\S+\s+\+\d+ms\s+container /);
    expect(explained.stdout).to.match(/\nfinished\s+\S+\s+\+\d+ms\s+UNAVAILABLE: .* after \d+ms/);
  });

  it('a call whose function raised: raised (code OK) in readie calls --failed and readie call, with its traceback in readie logs', async () => {
    const running = tenantA.start({ ...RAISES, args: [-3] });
    const failure = await running.result.then(
      () => null,
      (error: unknown) => error,
    );
    expect(failure).to.be.instanceOf(RemoteExecutionError);
    const requestId = running.requestId;

    const call = await callJson(requestId);
    expect(call).to.include({
      state: 'raised',
      code: 'OK',
      raisedType: 'ValueError',
      raisedMessage: 'n must be positive, got -3 ...',
      message: 'raised ValueError: n must be positive, got -3 ...',
    });
    // The tenant's own list says the same (TenantService.OwnCalls).
    const own = await tenantA.calls({ failed: true });
    expect(own.find((c) => c.requestId === requestId)).to.include({ state: 'raised' });

    const page = await readie('call', requestId);
    expect(page.out).to.match(/state\s+raised \(OK\)/);
    expect(page.out).to.match(/raised\s+ValueError: n must be positive, got -3 \.\.\./);
    expect(page.out).to.match(/finished\s+\S+\s+\+\S+\s+OK: raised ValueError: n must be positive/);
    const table = await readie('calls', '--failed');
    expect(table.out).to.match(new RegExp(`${requestId}.*check.*raised.*OK`));

    const logs = await readie('logs', requestId);
    expect(logs.code, logs.err).to.equal(0);
    expect(logs.out).to.include('checking -3');
    expect(logs.out).to.include('[readie] Traceback (most recent call last):');
    expect(logs.out).to.match(
      /\[readie\] the function raised ValueError: n must be positive, got -3 \.\.\.\n/,
    );
    expect(logs.out).to.match(
      /\[readie\] call answered in \d+ ms \(the function raised ValueError\)\n?$/,
    );
  });

  it("a map's batches: each shows the inputs it carried, in readie calls, readie call and the tenant's list", async () => {
    // The first batch's inputs 1 to 3, the second's -4, 5 and -6 (two of them raise).
    const options = { chunkSize: 3, maxConcurrency: 1, progress: false, returnExceptions: true };
    const results: unknown[] = [];
    for await (const result of tenantA.map(RAISES, [1, 2, 3, -4, 5, -6], options)) {
      results.push(result instanceof Error ? 'raised' : result);
    }
    expect(results).to.deep.equal([1, 2, 3, 'raised', 5, 'raised']);
    // Newest first.
    const batches = (await tenantA.calls({ function: 'check' })).filter(
      (call) => call.inputs !== undefined,
    );
    expect(batches.map((call) => [call.inputs, call.inputsRaised, call.state])).to.deep.equal([
      [3, 2, 'succeeded'],
      [3, 0, 'succeeded'],
    ]);
    const [raising, clean] = batches.map((call) => call.requestId) as [string, string];
    expect(await callJson(raising)).to.include({ inputs: 3, inputsRaised: 2 });
    expect((await readie('call', clean)).out).to.match(/\n {2}inputs {5}3 \(a batch of a map\)\n/);
    expect((await readie('call', raising)).out).to.match(
      /\n {2}inputs {5}3, 2 raised \(a batch of a map\)\n/,
    );
    const table = await readie('calls', '--function', 'check');
    expect(table.out).to.match(new RegExp(`${clean}.*check.*succeeded\\W+3\\W+OK`));
    expect(table.out).to.match(new RegExp(`${raising}.*check.*succeeded\\W+3, 2 raised\\W+OK`));
    // The batch some of whose inputs raised is listed as failed; the other is not.
    const failed = (await tenantA.calls({ failed: true })).map((call) => call.requestId);
    expect(failed).to.include(raising).and.not.include(clean);
    const logs = await readie('logs', raising);
    expect(logs.out).to.match(/\[readie\] call answered in \d+ ms \(2 of its 3 inputs raised\)/);
  });

  it("a session's calls: each shows its session and the container the session kept", async () => {
    const session = tenantA.session();
    const first = session.start({ ...KEEP, args: ['v1'] });
    expect(await first.result).to.equal('v1');
    const second = session.start({ ...READ, args: [] });
    expect(await second.result).to.equal('v1');

    const one = await callJson(first.requestId);
    const two = await callJson(second.requestId);
    expect(one).to.include({ sessionId: session.id, state: 'succeeded', code: 'OK' });
    expect(two).to.include({ sessionId: session.id, state: 'succeeded', code: 'OK' });
    expect(two.containerId).to.equal(one.containerId).and.not.equal('');
    expect(two.attempts[0]?.containerId, 'placed in the session container').to.equal(
      one.containerId,
    );

    const logs = await readie('logs', first.requestId, '--timestamps');
    expect(logs.out).to.match(/^\d{4}-\d\d-\d\dT\S+Z kept v1$/m);

    // The second call reused the pin: it ended before its events committed.
    await settledLog(test);
    const explained = replayCli('explain', test.logDir, second.requestId);
    expect(explained.status, explained.stderr).to.equal(0);
    expect(explained.stdout).to.include(session.id);
    expect(explained.stdout).to.match(
      new RegExp(`\\nplaced\\s+\\S+\\s+\\+\\d+ms\\s+worker hist-w1, container ${one.containerId}`),
    );
    expect(explained.stdout).to.match(/\nfinished\s+\S+\s+\+\d+ms\s+OK after \d+ms/);

    const listed = await tenantA.calls({ function: 'keep' });
    expect(listed.map((c) => c.requestId)).to.include(first.requestId);
    expect(listed.every((c) => c.function === 'keep')).to.equal(true);
  });

  it('a call whose client left: its output up to then is kept, and readable once the client is gone', async () => {
    const client = new ReadieClient({ address: test.address, insecure: true, token: TENANT_A });
    const abort = new AbortController();
    const seen: string[] = [];
    const running = client.start(
      { ...SLOW_PRINTER, args: [] },
      {
        signal: abort.signal,
        onLog: (line) => {
          seen.push(line.text);
          if (seen.length === 5) abort.abort();
        },
      },
    );
    await running.result.catch(() => undefined);
    client.close();
    const requestId = running.requestId;

    await eventually(
      () => test.router.state.reservations.size === 0,
      'the call released after the client left',
    );
    const output = await tenantA.logs(requestId);
    const texts = output.lines.map((line) => line.text);
    // Every line the client saw is kept, in order, then readie's note of the cancel.
    const printed = output.lines.filter((line) => line.source === LogSource.LOG_SOURCE_STDOUT);
    expect(printed.slice(0, 5).map((line) => line.text)).to.deep.equal(seen.slice(0, 5));
    expect(output.lines.at(-1)?.source).to.equal(LogSource.LOG_SOURCE_SYSTEM);
    expect(texts.at(-1)).to.match(/^call cancelled after/);
    const call = await tenantA.describeCall(requestId);
    expect(call.code).to.equal('CANCELLED');
  });

  it('logs --follow: the lines of a running call as they come, to its end', async () => {
    let firstLine: () => void = () => undefined;
    const started = new Promise<void>((resolve) => (firstLine = resolve));
    const running = tenantA.start(
      {
        source:
          'import time\ndef ticks():\n    for i in range(8):\n        print(f"t{i}", flush=True)\n        time.sleep(0.15)\n    return 8\n',
        function: 'ticks',
        args: [],
      },
      { onLog: (line) => line.text === 't0' && firstLine() },
    );
    await started;
    const heard: string[] = [];
    const followed = await tenantA.logs(running.requestId, {
      follow: true,
      onLine: (line) => heard.push(line.text),
    });
    expect(await running.result).to.equal(8);
    const printed = followed.lines
      .filter((line) => line.source === LogSource.LOG_SOURCE_STDOUT)
      .map((line) => line.text);
    expect(printed).to.deep.equal(['t0', 't1', 't2', 't3', 't4', 't5', 't6', 't7']);
    expect(heard.at(-1)).to.match(/^call answered in \d+ ms$/);
  });

  it("two tenants: neither lists, reads or fetches the output of the other's calls (answered as unknown IDs)", async () => {
    const mine = tenantA.start({ ...KEEP, args: ['a'] });
    await mine.result;
    const listedByB = await tenantB.calls();
    expect(listedByB.map((c) => c.requestId)).to.not.include(mine.requestId);
    expect(listedByB.every((c) => c.tenantId === 'tenant-b')).to.equal(true);

    const refusal = async (read: () => Promise<unknown>) =>
      read().then(
        () => 'answered',
        (error: ReadieError) => `${error.codeName}: ${error.details}`,
      );
    const foreign = await refusal(() => tenantB.describeCall(mine.requestId));
    const foreignError: unknown = await tenantB
      .describeCall(mine.requestId)
      .catch((error: unknown) => error);
    expect(foreignError).to.be.instanceOf(NotFoundError).and.not.instanceOf(SessionExpiredError);
    const unknown = await refusal(() => tenantB.describeCall('never-used-request-id'));
    expect(foreign).to.match(/^NOT_FOUND: no call .* of yours/);
    expect(foreign.replace(mine.requestId, 'ID')).to.equal(
      unknown.replace('never-used-request-id', 'ID'),
    );
    const foreignLogs = await refusal(() => tenantB.logs(mine.requestId));
    const unknownLogs = await refusal(() => tenantB.logs('never-used-request-id'));
    expect(foreignLogs).to.match(/^NOT_FOUND/);
    expect(foreignLogs.replace(mine.requestId, 'ID')).to.equal(
      unknownLogs.replace('never-used-request-id', 'ID'),
    );

    // The operator sees both tenants; an unknown ID names where the history looked.
    const all = await readie('calls', '--json');
    const tenants = new Set(
      (JSON.parse(all.out) as { calls: CallView[] }).calls.map((c) => c.tenantId),
    );
    expect([...tenants].sort()).to.deep.equal(['tenant-a']);
    const missing = await readie('call', 'no-such-call');
    expect(missing.code).to.equal(1);
    expect(missing.err).to.match(
      /NOT_FOUND: no call no-such-call in the router's call history: it holds \d+ calls requested since .*\(HISTORY_RETENTION, HISTORY_MAX_CALLS\)/,
    );
    // An ID no call can have is refused as malformed, without echoing it back.
    const long = 'z'.repeat(100_000);
    const tooLong = await refusal(() => tenantB.describeCall(long));
    expect(tooLong).to.equal(
      'INVALID_ARGUMENT: request_id is 100000 characters long: an ID has at most 256',
    );
    const escape = await refusal(() => tenantB.logs('r\x1b[31m1'));
    expect(escape).to.match(/^INVALID_ARGUMENT: request_id holds U\+001B at character 2/);
    const longForOperator = await readie('call', long);
    expect(longForOperator.code).to.equal(1);
    expect(longForOperator.err).to.contain('request_id is 100000 characters long');
    const since = await readie('calls', '--since', '10');
    expect(since.code).to.equal(2);
    expect(since.err).to.match(/--since: "10" has no unit/);
  });

  it("the Python client: readie.calls(), readie.call_record() and readie.logs() of the tenant's own calls only", async () => {
    const env = {
      READIE_ADDRESS: test.address,
      READIE_INSECURE: '1',
      PYTHONPATH: join(ROOT, 'python'),
    };
    const script = join(ROOT, 'test/e2e/scripts/history.py');
    // Not execFileSync: the router runs in this process and must answer meanwhile.
    const run = async (token: string, ...args: string[]) => {
      const { stdout: out } = await promisify(execFile)(PYTHON, [script, ...args], {
        env: { ...process.env, ...env, READIE_AUTH_TOKEN: token },
        encoding: 'utf8',
      });
      return JSON.parse(out.trim().split('\n').at(-1) ?? '{}') as Record<string, unknown>;
    };
    const mine = await run(TENANT_A);
    expect(mine.listed).to.include(mine.requestId);
    expect(mine).to.include({ function: '__main__.greet', state: 'succeeded' });
    expect(mine.lines).to.deep.include(['stdout', 'hello py']);
    // A function that raised: the caller got the exception; the history lists it as failed.
    expect(mine.raised).to.deep.include({
      state: 'raised',
      code: 'OK',
      raisedType: 'KeyError',
      raisedMessage: "'missing'",
      caught: 'KeyError',
    });
    expect(mine.failedListed).to.include(mine.raised && (mine.raised as { id: string }).id);
    const theirs = await run(TENANT_B, String(mine.requestId));
    expect(theirs.listed).to.not.include(mine.requestId);
    expect(theirs.record).to.match(/^NOT_FOUND: no call .* of yours/);
    // Not found, not an expired session.
    expect(theirs.recordError).to.equal('NotFoundError');
    expect(theirs.logs).to.match(/^NOT_FOUND: no call .* of yours/);
  });

  it('a re-placed call: each attempt is shown, the failed dial with its error', async () => {
    const gone = await ScriptedWorker.start({ workerId: 'a-gone' });
    await gone.connect(test.address, { token: GONE }).reportStatus();
    gone.stop();
    const running = tenantA.start({ ...KEEP, args: ['again'] }); // a-gone sorts first
    expect(await running.result).to.equal('again');
    const call = await callJson(running.requestId);
    expect(call.attempts.map((a) => a.workerId)).to.deep.equal(['a-gone', 'hist-w1']);
    expect(call.attempts[0]?.dialError).to.not.equal('');
    expect(call.attempts[1]?.dialError).to.equal('');
    expect(call).to.include({ state: 'succeeded', workerId: 'hist-w1' });
    const page = await readie('call', running.requestId);
    expect(page.out).to.match(/dial failed .* a-gone|dial failed/);
    expect(page.out).to.match(/placed again .* worker hist-w1/);
    const story = (await settledLog(test))
      .filter((e) => 'requestId' in e && e.requestId === running.requestId)
      .map((e) => e.type);
    expect(story).to.include('CallDialFailed');
    const explained = replayCli('explain', test.logDir, running.requestId);
    expect(explained.status, explained.stderr).to.equal(0);
    expect(explained.stdout).to.include('a-gone');
    expect(explained.stdout).to.match(/\ndial failed\s+\S+\s+\+\d+ms\s+\S/);
    expect(explained.stdout).to.match(/\nplaced again\s+\S+\s+\+\d+ms\s+worker hist-w1/);

    // The whole log this suite wrote verifies: every decision of the core made again.
    const verified = replayCli('verify', test.logDir);
    expect(verified.status, verified.stdout + verified.stderr).to.equal(0);
    expect(verified.stdout).to.match(/and \d+ other decisions of the core/);
  });
  // Last: it moves the worker's clock, stops the worker and moves the router's clock.
  it('readie logs once the output aged out on its worker, then once that worker is gone: NOT_FOUND naming why', async () => {
    const running = tenantA.start({ ...KEEP, args: ['brief'] });
    expect(await running.result).to.equal('brief');
    const { requestId } = running;
    const kept = await readie('logs', requestId);
    expect(kept.code, kept.err).to.equal(0);
    expect(kept.out).to.include('kept brief');

    // The worker's clock passes OUTPUT_RETENTION (24 h by default) after the call's end.
    workerAhead.ms = 86_400_000 + 60_000;
    const aged = await readie('logs', requestId);
    expect(aged.code, aged.err).to.equal(1);
    expect(aged.err).to.match(
      new RegExp(
        `NOT_FOUND: worker hist-w1: the output of call ${requestId} aged out at \\S+ \\(OUTPUT_RETENTION 1d after the call ended\\)`,
      ),
    );
    const agedForTenant = await tenantA.logs(requestId).then(
      () => 'answered',
      (error: ReadieError) => `${error.codeName}: ${error.details}`,
    );
    expect(agedForTenant).to.match(/^NOT_FOUND: worker hist-w1: the output of call .* aged out/);

    // The worker stops (it tells the router it is leaving), and the router's clock passes
    // WORKER_TTL (30 s by default): the reaper evicts it (`left`).
    await harness.stop();
    workerStopped = true;
    routerAhead.ms = 31_000;
    await eventually(
      () => test.router.state.workers.get('hist-w1')?.status === 'evicted',
      'the reaper to evict the silent worker',
      20_000,
    );
    const gone = await readie('logs', requestId);
    expect(gone.code, gone.err).to.equal(1);
    expect(gone.err).to.include(
      `NOT_FOUND: worker hist-w1 that ran call ${requestId} was evicted (left): its output went with it`,
    );
    // The tenant's client hears the same.
    const forTenant = await tenantA.logs(requestId).then(
      () => 'answered',
      (error: ReadieError) => `${error.codeName}: ${error.details}`,
    );
    expect(forTenant).to.equal(
      `NOT_FOUND: worker hist-w1 that ran call ${requestId} was evicted (left): its output went with it`,
    );
  });
});
