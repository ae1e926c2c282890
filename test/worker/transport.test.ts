import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { expect } from 'chai';
import { credentials, ServerCredentials, status } from '@grpc/grpc-js';
import { ExecutionServiceClient } from '../../src/proto/gen/readie/v1/execution.js';
import { WorkerStatus } from '../../src/proto/gen/readie/v1/registry.js';
import { ExecutorConnection } from '../../src/worker/executor-link/index.js';
import { ExecutorTimeoutError } from '../../src/worker/core/errors.js';
import { ScriptedRouter } from '../support/scripted-router.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';
import { envelopeOf, execute, header, jsonCall, startHarness } from '../support/worker-harness.js';

const CALL = jsonCall('def f():\n    return "over tls"\n', 'f');

describe('transport', function () {
  this.timeout(60_000);
  afterEach(cleanTempDirs);

  it('with TLS flags: registers with the router over TLS and serves ExecutionService over TLS', async () => {
    const dir = tempDir('rw-tls-');
    const cert = join(dir, 'cert.pem');
    const key = join(dir, 'key.pem');
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-days',
        '1',
        '-subj',
        '/CN=localhost',
        '-addext',
        'subjectAltName=DNS:localhost,IP:127.0.0.1',
        '-keyout',
        key,
        '-out',
        cert,
      ],
      { stdio: 'ignore' },
    );
    const pem = { cert: readFileSync(cert), key: readFileSync(key) };
    const router = await ScriptedRouter.start(
      0,
      ServerCredentials.createSsl(null, [{ private_key: pem.key, cert_chain: pem.cert }]),
    );
    const harness = await startHarness({
      router,
      flags: { insecure: false, tlsCa: cert, tlsCert: cert, tlsKey: key },
    });
    try {
      expect(router.statuses()[0]!.status).to.equal(WorkerStatus.WORKER_STATUS_READY);
      const secure = new ExecutionServiceClient(
        `127.0.0.1:${harness.worker.port}`,
        credentials.createSsl(pem.cert),
      );
      expect(envelopeOf(await execute(secure, header({}), CALL)).value).to.equal('over tls');
      secure.close();
      const plain = await execute(harness.client, header({}), CALL);
      expect(plain.code).to.equal(status.UNAVAILABLE);
    } finally {
      await harness.stop();
      await router.stop();
    }
  });

  it('dials an executor socket with retries until it appears, and gives up after the timeout', async () => {
    const dir = tempDir('rw-dial-');
    const path = join(dir, 'late.sock');
    const late = createServer((socket) => socket.write(Buffer.from([0, 0, 0, 3, 1, 0x7b, 0x7d])));
    setTimeout(() => late.listen(path), 300);
    const started = performance.now();
    const connection = await ExecutorConnection.dial(path, { timeoutMs: 5_000 }).catch(
      (e: Error) => e,
    );
    expect(performance.now() - started).to.be.greaterThan(250);
    // The HELLO here is "{}": it does not fit the protocol (no protocol version), so it is refused.
    expect((connection as Error).message).to.include('protocol');
    late.close();

    const never = join(dir, 'never.sock');
    const timedOut = await ExecutorConnection.dial(never, { timeoutMs: 300 }).catch(
      (e: Error) => e,
    );
    expect(timedOut).to.be.instanceOf(ExecutorTimeoutError);
    expect((timedOut as ExecutorTimeoutError).code).to.equal('DEADLINE_EXCEEDED');

    const silent = createServer(() => undefined);
    const mute = join(dir, 'mute.sock');
    await new Promise<void>((resolve) => silent.listen(mute, resolve));
    const noHello = await ExecutorConnection.dial(mute, { timeoutMs: 300 }).catch((e: Error) => e);
    expect(noHello).to.be.instanceOf(ExecutorTimeoutError);
    expect((noHello as Error).message).to.include('sent no HELLO');
    silent.close();
  });
});
