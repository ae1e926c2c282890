import { expect } from 'chai';
import { createLogger } from '../../src/router/index.js';
import { bearer, codeOf, foldLog, run, startTestRouter } from '../support/router/harness.js';
import { captureLog } from '../support/log-capture.js';
import { ScriptedWorker } from '../support/router/scripted-worker.js';
import { cleanTempDirs } from '../support/temp.js';

const TOKEN = 'observability-token-value';

describe('router: logs and metrics', function () {
  this.timeout(60_000);
  afterEach(cleanTempDirs);

  it('logs JSON lines naming the call, explains placement at debug, never payloads or tokens', async () => {
    const log = captureLog();
    const test = await startTestRouter({
      logger: createLogger('debug', log.stream),
      auth: { mode: 'single-token', token: TOKEN },
      metrics: '127.0.0.1:0',
    });
    const worker = await ScriptedWorker.start({ workerId: 'w1' });
    await worker.connect(test.address, { token: TOKEN }).reportStatus();
    try {
      const outcome = await run(
        test.client,
        'echo PAYLOAD-SECRET-BYTES',
        { requestId: 'r-logged', sessionId: 's-logged' },
        { metadata: bearer(TOKEN) },
      );
      expect(codeOf(outcome)).to.equal('OK');
      expect(codeOf(await run(test.client, 'echo', {}, { metadata: bearer('wrong') }))).to.equal(
        'UNAUTHENTICATED',
      );
      const oversized = await run(
        test.client,
        'echo',
        { memory: 64 * 1024 ** 3 },
        { metadata: bearer(TOKEN) },
      );
      expect(codeOf(oversized)).to.equal('RESOURCE_EXHAUSTED');

      const response = await fetch(`http://${test.router.metricsAddress}/metrics`);
      const metrics = await response.text();
      expect(response.status).to.equal(200);
      expect(metrics).to.match(/^readie_router_placements_total 1$/m);
      expect(metrics).to.match(
        /^readie_router_calls_finished_total\{code="OK",raised="false"\} 1$/m,
      );
      expect(metrics).to.match(/^readie_router_calls_in_flight 0$/m);
      expect(metrics).to.match(/^readie_router_workers\{status="ready"\} 1$/m);
      expect(metrics).to.match(/^readie_router_sessions\{state="pinned"\} 1$/m);
      expect(metrics).to.match(/^readie_router_relay_bytes_total\{direction="to_worker"\} 25$/m);
      expect(metrics).to.match(/^readie_router_relay_bytes_total\{direction="to_client"\} 25$/m);
      expect(metrics).to.match(/^readie_router_log_append_seconds_count [1-9]/m);
      expect(metrics).to.match(/^readie_router_unauthenticated_total 1$/m);
      expect(metrics).to.match(/^readie_router_rejections_total\{code="RESOURCE_EXHAUSTED"\} 1$/m);
      expect(metrics).not.to.match(/raised="true"/);
      // A call whose function raised ends OK, counted apart.
      const raised = await run(
        test.client,
        'raise ValueError age must be >= 0',
        { requestId: 'r-raised' },
        { metadata: bearer(TOKEN) },
      );
      expect(codeOf(raised)).to.equal('OK');
      const after = await (await fetch(`http://${test.router.metricsAddress}/metrics`)).text();
      expect(after).to.match(/^readie_router_calls_finished_total\{code="OK",raised="false"\} 1$/m);
      expect(after).to.match(/^readie_router_calls_finished_total\{code="OK",raised="true"\} 1$/m);
      expect((await fetch(`http://${test.router.metricsAddress}/other`)).status).to.equal(404);

      const callLines = log.lines().filter((line) => line.requestId === 'r-logged');
      const messages = callLines.map((line) => line.msg);
      expect(messages).to.include.members([
        'placement explained',
        'call placed',
        'call bound',
        'call finished',
      ]);
      for (const line of callLines) {
        expect(line, String(line.msg)).to.include({ sessionId: 's-logged' });
        expect(line).to.have.property('workerId');
      }
      expect(callLines.filter((line) => line.msg !== 'placement explained')).to.satisfy(
        (lines: Record<string, unknown>[]) => lines.every((line) => line.workerId === 'w1'),
      );
      expect(log.text()).to.not.include('PAYLOAD-SECRET-BYTES');
      expect(log.text()).to.not.include(TOKEN);
    } finally {
      worker.stop();
      await test.close();
    }
    expect(foldLog(test.logDir).reservations.size, 'no reservation in the log').to.equal(0);
  });
});
