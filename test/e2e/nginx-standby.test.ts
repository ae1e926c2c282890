/**
 * nginx (Debian's, with deploy/nginx-routers.conf) in front of a leading and a standby router on
 * a real three-node NATS cluster, with a real worker: a call nginx hands the standby is refused
 * before anything runs and passed on, and the readie client's retry through nginx gets it served;
 * with the leader killed, nginx leaves it and calls are served by the new leader.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { credentials } from '@grpc/grpc-js';
import { expect } from 'chai';
import { ReadieClient } from '../../src/client/index.js';
import { ProxyServiceClient } from '../../src/proto/gen/readie/v1/proxy.js';
import { freePort } from '../support/e2e-cluster.js';
import {
  type ChildRouter,
  eventuallyAsync,
  killRouter,
  readLog,
  startLeaderAndStandby,
  untilLogged,
} from '../support/jetstream-routers.js';
import { useNatsCluster } from '../support/nats.js';
import { startRealWorker, type RealWorker } from '../support/real-worker.js';
import { codeOf, finishedLog, run, storyOf } from '../support/router/harness.js';
import { tempDir } from '../support/temp.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const TLS = join(ROOT, 'test', 'support', 'tls');

/** deploy/nginx-routers.conf pointed at the test's routers, port, files and TLS material. */
function routersConfig(dir: string, listenPort: number, routers: readonly string[]): string {
  const original = readFileSync(join(ROOT, 'deploy', 'nginx-routers.conf'), 'utf8');
  // The test's routers serve plaintext on loopback: grpc://, without the grpc_ssl_* lines (the
  // file's comment says so).
  const replacements: [RegExp, string][] = [
    // One worker process: one round robin, so the standby surely gets some of the calls.
    [/^worker_processes auto;$/m, 'worker_processes 1;'],
    [/^pid .*;$/m, `pid ${join(dir, 'nginx.pid')};`],
    [/^error_log .*;$/m, `error_log ${join(dir, 'error.log')} warn;`],
    [/^(\s*)access_log .*;$/m, `$1access_log ${join(dir, 'access.log')};`],
    [/router-a\.example\.internal:50051/, routers[0] as string],
    [/router-b\.example\.internal:50051/, routers[1] as string],
    [/grpc_pass grpcs:\/\/readie_router;/, 'grpc_pass grpc://readie_router;'],
    [/^\s*(# The router's certificate.*|# Both routers' certificates.*|grpc_ssl_.*;)\n/gm, ''],
    [/^(\s*)listen 443 ssl http2;$/m, `$1listen 127.0.0.1:${listenPort} ssl http2;`],
    [/^(\s*)ssl_certificate .*;$/m, `$1ssl_certificate ${join(TLS, 'server.pem')};`],
    [/^(\s*)ssl_certificate_key .*;$/m, `$1ssl_certificate_key ${join(TLS, 'server-key.pem')};`],
  ];
  let config = original;
  for (const [pattern, replacement] of replacements) {
    if (!pattern.test(config))
      throw new Error(`deploy/nginx-routers.conf no longer has ${pattern}`);
    config = config.replace(pattern, replacement);
  }
  return config;
}

describe('nginx over a leader and a running standby (real nginx, routers, NATS, worker)', function () {
  this.timeout(180_000);
  const nats = useNatsCluster();
  let location: string;
  let leader: ChildRouter;
  let standby: ChildRouter;
  let worker: RealWorker;
  let nginx: ChildProcess | undefined;
  let address: string;

  before(async () => {
    location = nats.streamLocation('nginx');
    ({ leader, standby } = await startLeaderAndStandby(location));
    worker = await startRealWorker(`${leader.address},${standby.address}`);
    await untilLogged(location, 'WorkerRegistered', 'the worker to register');
    const dir = tempDir('nginx-routers-');
    mkdirSync(dir, { recursive: true });
    const port = await freePort();
    const conf = join(dir, 'nginx.conf');
    // The standby first: nginx's round robin hands it the first call.
    writeFileSync(conf, routersConfig(dir, port, [standby.address, leader.address]));
    nginx = spawn('nginx', ['-p', dir, '-c', conf, '-g', 'daemon off;'], {
      stdio: 'ignore',
    });
    address = `localhost:${port}`;
    await eventuallyAsync(
      async () => {
        const client = new ReadieClient({ address, caFile: join(TLS, 'ca.pem') });
        const up = await client
          .slots()
          .then(() => true)
          .catch(() => false);
        client.close();
        return up;
      },
      'nginx to listen',
      15_000,
    );
  });

  after(async () => {
    nginx?.kill('SIGTERM');
    await worker?.stop();
    await killRouter(leader);
    await killRouter(standby);
  });

  it("passes the standby's refusal on before anything runs, and the client's retry through nginx is served", async () => {
    // A bare gRPC client (no retries): of a few calls, nginx hands some to the standby, which
    // refuses them unsent, naming the leader; the trailers come through nginx.
    const bare = new ProxyServiceClient(
      address,
      credentials.createSsl(readFileSync(join(TLS, 'ca.pem'))),
    );
    const refusals = [];
    for (let i = 0; i < 4; i += 1) {
      const outcome = await run(bare, 'echo', { requestId: `bare-${i}` });
      if (outcome.error?.metadata.get('readie-standby')[0] === '1') refusals.push(outcome);
    }
    bare.close();
    expect(refusals.length, 'calls nginx handed the standby').to.be.above(0);
    for (const refused of refusals) {
      expect(codeOf(refused)).to.equal('UNAVAILABLE');
      expect(refused.error?.metadata.get('readie-not-started')).to.deep.equal(['1']);
      expect(refused.error?.metadata.get('readie-leader')).to.deep.equal([leader.address]);
    }

    const readie = new ReadieClient({ address, caFile: join(TLS, 'ca.pem') });
    try {
      const calls = Array.from({ length: 6 }, (_, i) =>
        readie.start<number>({ module: 'math', function: 'hypot', args: [3 * i, 4 * i] }),
      );
      for (const [i, call] of calls.entries()) expect(await call.result).to.equal(5 * i);
      const events = await finishedLog(
        location,
        calls.map((call) => call.requestId),
      );
      for (const call of calls) {
        const story = storyOf(events, call.requestId);
        expect(
          story.filter((t) => t === 'CallRequested'),
          call.requestId,
        ).to.have.length(1);
      }
    } finally {
      readie.close();
    }
  });

  it('leaves a killed leader for the standby, which serves once it leads', async () => {
    await killRouter(leader);
    const readie = new ReadieClient({ address, caFile: join(TLS, 'ca.pem') });
    try {
      for (let i = 1; i <= 4; i += 1) {
        expect(
          await readie.call({ module: 'math', function: 'hypot', args: [3 * i, 4 * i] }),
        ).to.equal(5 * i);
      }
    } finally {
      readie.close();
    }
    const starts = (await readLog(location)).filter((e) => e.type === 'RouterStarted');
    expect(starts.map((e) => [e.routerId, e.takeoverFrom])).to.deep.include([
      'router-b',
      'router-a',
    ]);
  });
});
