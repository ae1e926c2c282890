import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { credentials } from '@grpc/grpc-js';
import { openEventLog, readJsonl, type JsonlEvent } from '../../src/events/index.js';
import { AdminServiceClient, StatusResponse } from '../../src/proto/gen/readie/v1/admin.js';
import type { PinStatusResponse } from '../../src/proto/gen/readie/v1/pins.js';
import { renderStatus } from '../../src/cli/status/status-sections.js';
import { renderPins } from '../../src/cli/status/pin-sections.js';
import { renderRouters } from '../../src/cli/status/router-sections.js';
import { ReadieError } from '../../src/client/errors.js';
import { printable } from '../../src/shared/printable.js';
import { explainScreen } from '../../replay/format/explain-screen.js';
import { stateView } from '../../replay/format/state-view.js';
import { callRow, callTable } from '../../replay/format/run-report.js';
import { explainCall } from '../../replay/commands/explain-call.js';
import { openLogSource } from '../../replay/io/log-source.js';
import { fold } from '../../src/projections/index.js';
import { demand, history, placed, pinned, registered, requested } from '../support/events.js';
import { HOSTILE, UNPRINTABLE } from '../support/hostile-text.js';
import { replayCli, replayEvents } from '../support/replay.js';
import { bearer, startTestRouter, type TestRouter } from '../support/router/harness.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';

// Values an old log may hold (written before the router bounded what a call carries), or a
// hostile worker may report. Each tries something else on the operator's terminal.
const REQUEST = 'req-1\nFORGED  placed on w9';
const SESSION = 'ses-\x1b]0;pwned\x07\x1b[2J\x1b[H';
const TENANT = 'tenant-\u202eevil';
const CONTAINER = 'c1\rFORGED';
const CHECKPOINT = 'ckpt-\x1b[31mred\x1b[0m';
const WORKER_ERROR = 'disk full\n\x9b2JFORGED';
const HINTS = ['\x1b[5mnumpy', 'x'.repeat(70_000)];
const PACKAGES = ['numpy\n==FORGED', 'torch\u2028'];
const REJECTED = 'req-2\u2066\x07';

const OPERATOR = 'operator-token-0123456789abcdef';

/** The hostile log, as the events an old router wrote. */
function hostileHistory() {
  return history(
    {
      type: 'RouterStarted',
      config: {},
      version: 'old\x1b[8m',
      rulesVersion: null,
      routerId: null,
      takeoverFrom: null,
      schemaVersion: null,
    },
    registered('w1'),
    registered('w2', { status: 'error', error: WORKER_ERROR }),
    requested(REQUEST, {
      sessionId: SESSION,
      tenantId: TENANT,
      demand: demand({ imports: HINTS, packages: ['numpy'], checkpointId: null }),
    }),
    placed(REQUEST, 'w1', { sessionId: SESSION, packages: ['numpy'] }),
    { type: 'CallBound', requestId: REQUEST, containerId: CONTAINER, checkpointId: CHECKPOINT },
    {
      type: 'ContainerStateChanged',
      workerId: 'w1',
      containerId: CONTAINER,
      state: 'busy',
      checkpointId: CHECKPOINT,
      reportSeq: null,
    },
    pinned(SESSION, 'w1', CONTAINER, REQUEST, CHECKPOINT),
    requested(REJECTED, { tenantId: TENANT, demand: demand({ packages: PACKAGES }) }),
    {
      type: 'CallRejected',
      requestId: REJECTED,
      sessionId: null,
      code: 'INVALID_ARGUMENT',
      message: `package entry "${PACKAGES[0]}" is not valid`,
      version: null,
      routingRevision: null,
      retryAfterMs: null,
    },
    {
      type: 'ResidencyChanged',
      workerId: 'w1',
      checkpointId: CHECKPOINT,
      state: 'failed',
      error: WORKER_ERROR,
    },
  );
}

/** No character but the page's own line breaks that a terminal could obey, and no forged line. */
function expectSafe(page: string, what: string): void {
  expect(page.replaceAll('\n', ''), what).to.not.match(UNPRINTABLE);
  for (const line of page.split('\n')) expect(line, what).to.not.match(/^\s*FORGED/);
  expect(page.length, `${what}: long text is cut`).to.be.below(60_000);
}

describe('tenant text in what a person reads: status and replay of a log holding hostile values', function () {
  this.timeout(60_000);
  const events = hostileHistory().events;
  let jsonl: string;

  before(() => {
    jsonl = join(tempDir('readie-tenant-text-'), 'hostile.jsonl');
    writeFileSync(jsonl, events.map((event) => JSON.stringify(event)).join('\n') + '\n');
  });

  after(() => cleanTempDirs());

  it('replay explain shows every ID, hint, package and message escaped (in process)', async () => {
    const source = await openLogSource(jsonl);
    try {
      for (const requestId of [REQUEST, REJECTED]) {
        const explained = await explainCall(source, { requestId });
        expect(explained, requestId).to.not.equal(undefined);
        const page = explainScreen(
          explained!.request,
          explained!.explanation,
          explained!.result,
          explained!.atCall,
          explained!.replacements,
        );
        expectSafe(page, `explain ${JSON.stringify(requestId)}`);
        expect(page).to.include(`Request ${printable(requestId)}`);
        expect(page).to.include(printable(TENANT));
      }
    } finally {
      await source.close();
    }
  });

  it('replay state and replay run show the state and the calls escaped', () => {
    const state = stateView(fold(events));
    expectSafe(state, 'state');
    expect(state).to.include(printable(SESSION));
    expect(state).to.include(printable(CONTAINER));
    expect(state).to.include(printable(WORKER_ERROR));
    const run = callTable(replayEvents(events).map(callRow));
    expectSafe(run, 'run');
    expect(run).to.include(printable(REJECTED));
  });

  it('the replay CLI prints explain escaped, and a request ID it cannot find too', () => {
    const explained = replayCli('explain', jsonl, SESSION.replace('ses', 'req'));
    expect(explained.status).to.equal(2);
    expectSafe(explained.stderr, 'stderr');
    // Named as the screens print it, escaped, as an operator would copy it.
    const page = replayCli('explain', jsonl, printable(REQUEST));
    expect(page.status, page.stderr).to.equal(0);
    expectSafe(page.stdout, 'explain');
    expect(page.stdout).to.include(printable(SESSION));
  });

  it('readie status shows every string of an answer escaped, Recent failures, reservations and the queue too', () => {
    const answer = (text: (name: string) => string) =>
      StatusResponse.fromPartial({
        routerVersion: text('version'),
        catalogueRevision: text('revision'),
        workers: [
          {
            workerId: text('w1'),
            status: 'ready',
            address: text('address'),
            flavor: text('cpu'),
            reason: text('reason'),
            containers: [{ containerId: text('c1'), state: text('busy'), sessionId: text('s') }],
            probeFailures: 1,
            lastProbeProblem: text('problem'),
            failures: 1,
            recentFailures: [{ requestId: text('r1'), code: text('INTERNAL'), message: text('m') }],
          },
        ],
        sessions: [
          {
            sessionId: text('s1'),
            state: 'pinned',
            workerId: text('w1'),
            containerId: text('c1'),
            checkpointId: text('ckpt'),
          },
        ],
        reservations: [
          {
            requestId: text('r2'),
            sessionId: text('s1'),
            workerId: text('w1'),
            containerId: text('c1'),
            memory: 1,
          },
        ],
        queueTimeoutMs: 600_000,
        queue: [{ tenantId: text('acme'), depth: 2, oldestQueuedAt: text('2026-01-01T00:00:00Z') }],
      });
    const hostile = HOSTILE.map(([, text]) => text);
    let i = 0;
    const page = renderStatus(
      answer((name) => `${name}${hostile[i++ % hostile.length]}\nFORGED`),
      Date.now(),
    );
    expectSafe(page, 'status');
    const plain = renderStatus(
      answer((name) => name),
      Date.now(),
    );
    expect(page.split('\n').length).to.equal(plain.split('\n').length);
    expect(page).to.include('Recent failures');
    expect(page).to.include('Admission queue\nQUEUE_TIMEOUT 10m; 2 calls waiting');
  });

  describe('readie status of a router recovered from that log', () => {
    let test: TestRouter;
    let admin: AdminServiceClient;

    before(async () => {
      const dir = tempDir('readie-tenant-text-');
      writeFileSync(join(dir, 'tokens'), `operator ops ${OPERATOR}\n`, { mode: 0o600 });
      writeFileSync(join(dir, 'router.token'), 'router-token-0123456789abcdef', { mode: 0o600 });
      const logDir = join(dir, 'log');
      const log = await openEventLog(logDir);
      const stored: JsonlEvent[] = [];
      for await (const event of readJsonl(jsonl)) stored.push(event);
      await log.appendStored(stored).committed;
      await log.close();
      test = await startTestRouter({
        logDir,
        auth: {
          mode: 'tokens',
          tokensFile: join(dir, 'tokens'),
          routerTokenFile: join(dir, 'router.token'),
        },
      });
      admin = new AdminServiceClient(test.address, credentials.createInsecure());
    });

    after(async () => {
      admin.close();
      await test.close();
    });

    function status(): Promise<StatusResponse> {
      return new Promise((resolve, reject) =>
        admin.status({ includeExpiredSessions: true }, bearer(OPERATOR), (error, answer) =>
          error ? reject(error) : resolve(answer),
        ),
      );
    }

    function pinStatus(): Promise<PinStatusResponse> {
      return new Promise((resolve, reject) =>
        admin.pinStatus({ tenantId: '' }, bearer(OPERATOR), (error, answer) =>
          error ? reject(error) : resolve(answer),
        ),
      );
    }

    it('shows sessions, workers and residency errors escaped', async () => {
      const answer = await status();
      expect(answer.sessions.map((session) => session.sessionId)).to.include(SESSION);
      const page = renderStatus(answer, Date.now());
      expectSafe(page, 'status');
      expect(page).to.include(printable(SESSION));
      expect(page).to.include(printable(WORKER_ERROR));
      const pins = renderPins(await pinStatus());
      expectSafe(pins, 'pins');
      expect(pins).to.include(printable(WORKER_ERROR));
    });

    it('shows what a router answered in the Routers section escaped', () => {
      const error = new ReadieError('refused', { code: 9, details: 'no\x1b]0;t\x07\nFORGED' });
      const page = renderRouters([
        { role: 'leads', address: test.address, answer: {} },
        { role: 'failed', address: '10.0.0.1:1\x1b[2J', error },
        { role: 'stands by', address: '10.0.0.2:1', leader: 'evil\u202e:1', error },
      ]);
      expectSafe(page, 'routers');
    });
  });
});
