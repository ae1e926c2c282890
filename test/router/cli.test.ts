import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { credentials } from '@grpc/grpc-js';
import { configFromFlags, flagOf, routerAuthOf } from '../../src/cli/router-command.js';
import { ProxyServiceClient } from '../../src/proto/gen/readie/v1/proxy.js';
import { parseCatalogue, readCatalogueFile, RouterConfigError } from '../../src/router/index.js';
import { DEFAULT_CONFIG, SETTING_NAMES } from '../../src/shared/config.js';
import {
  bearer,
  codeOf,
  eventually,
  readLog,
  run,
  startTestRouter,
} from '../support/router/harness.js';
import { runReadie } from '../support/processes.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';

const CATALOGUE = {
  flavors: { cpu: { coldStartCost: 900, basePackages: [], checkpoints: [] } },
  importCosts: {},
  defaultImportCost: 100,
};

describe('readie router: command line and startup', function () {
  this.timeout(60_000);
  afterEach(cleanTempDirs);

  it('--help documents every flag and every setting with its environment variable', async () => {
    const child = runReadie(['router', '--help']);
    await child.exited;
    const help = child.lines.join('\n');
    for (const flag of [
      '--listen',
      '--log',
      '--insecure',
      '--tls-cert',
      '--tls-key',
      '--catalogue',
      '--metrics',
      '--auth',
      '--tokens-file',
      '--router-token-file',
      '--auth-token-file',
    ]) {
      expect(help).to.include(flag);
    }
    for (const name of SETTING_NAMES) {
      expect(help).to.include(flagOf(name));
      expect(help).to.include(`env ${name}`);
    }
    expect(help).to.include('0.0.0.0:50051');
  });

  it('refuses to start without TLS material or --insecure, saying what to pass', async () => {
    const child = runReadie(['router', '--log', tempDir()]);
    const { code } = await child.exited;
    expect(code).to.equal(2);
    expect(child.stderr()).to.match(/--tls-cert FILE and --tls-key FILE.*--insecure/);
  });

  it('reads settings from the environment, flags over them', () => {
    const config = configFromFlags(
      { sessionWaitTimeout: '5s', probeFailureThreshold: '7' },
      { SESSION_WAIT_TIMEOUT: '30s', WORKER_TTL: '1m', DEFAULT_MEMORY: '512MiB' },
    );
    expect(config).to.deep.equal({
      ...DEFAULT_CONFIG,
      SESSION_WAIT_TIMEOUT: 5_000,
      PROBE_FAILURE_THRESHOLD: 7,
      WORKER_TTL: 60_000,
      DEFAULT_MEMORY: 512 * 1024 ** 2,
    });
  });

  it('checks a catalogue file and names the field that is wrong', () => {
    const dir = tempDir();
    const path = join(dir, 'catalogue.json');
    writeFileSync(path, JSON.stringify({ ...CATALOGUE, defaultImportCost: -1 }));
    expect(() => readCatalogueFile(path)).to.throw(
      /catalogue .*catalogue\.json: field "defaultImportCost"/,
    );
    writeFileSync(path, '{ nope');
    expect(() => readCatalogueFile(path)).to.throw(/not valid JSON/);
    expect(() => readCatalogueFile(join(dir, 'missing.json'))).to.throw(
      /--catalogue .*cannot read it/,
    );
  });

  it('appends RouterStarted with the config and version, and CatalogueLoaded only when it changed', async () => {
    const logDir = tempDir();
    const catalogue = parseCatalogue(JSON.stringify(CATALOGUE), 'test');
    for (let start = 0; start < 2; start += 1) {
      const test = await startTestRouter({
        logDir,
        catalogue,
        auth: { mode: 'single-token', token: 'never-logged' },
      });
      await test.close();
    }
    const other = parseCatalogue(JSON.stringify({ ...CATALOGUE, defaultImportCost: 5 }), 'test');
    await (await startTestRouter({ logDir, catalogue: other })).close();
    const events = readLog(logDir);
    expect(events.map((event) => event.type)).to.deep.equal([
      'RouterStarted',
      'CatalogueLoaded',
      'RouterStarted',
      'RouterStarted',
      'CatalogueLoaded',
    ]);
    const started = events[0];
    expect(started).to.include({ version: 'test' });
    expect(Object.keys(started?.type === 'RouterStarted' ? started.config : {})).to.deep.equal(
      SETTING_NAMES,
    );
    expect(JSON.stringify(events)).to.not.include('never-logged');
    expect(catalogue.revision).to.match(/^sha256:[0-9a-f]{16}$/);
    expect(other.revision).to.not.equal(catalogue.revision);
  });

  it('refuses a bad --listen or --metrics before the log records a start', async () => {
    const logDir = tempDir();
    await (await startTestRouter({ logDir })).close();
    const child = runReadie([
      'router',
      '--insecure',
      '--auth',
      'none',
      '--log',
      logDir,
      '--listen',
      'bogus',
    ]);
    const { code } = await child.exited;
    expect(code).to.equal(2);
    expect(child.stderr()).to.match(/"bogus" is not an address/);
    let refused: unknown;
    await startTestRouter({ logDir, metrics: '127.0.0.1:nope' }).catch((error: unknown) => {
      refused = error;
    });
    expect(refused).to.be.instanceOf(RouterConfigError);
    expect(readLog(logDir).map((event) => event.type)).to.deep.equal(['RouterStarted']);
  });

  it('authenticates with a tokens file by default, and the development modes only when asked for', () => {
    const noEnv = {};
    const tokens = { auth: 'tokens', tokensFile: 't', routerTokenFile: 'r' };
    expect(routerAuthOf(tokens, noEnv)).to.deep.equal({
      mode: 'tokens',
      tokensFile: 't',
      routerTokenFile: 'r',
    });
    expect(() => routerAuthOf({ auth: 'tokens' }, { READIE_AUTH_TOKEN: 'x' })).to.throw(
      RouterConfigError,
      /--tokens-file FILE .*--router-token-file FILE.*--auth single-token/,
    );
    expect(() => routerAuthOf({ auth: 'tokens', tokensFile: 't' }, noEnv)).to.throw(
      /--router-token-file/,
    );
    expect(routerAuthOf({ auth: 'single-token' }, { READIE_AUTH_TOKEN: 'dev' })).to.deep.equal({
      mode: 'single-token',
      token: 'dev',
    });
    expect(() => routerAuthOf({ auth: 'single-token' }, noEnv)).to.throw(/READIE_AUTH_TOKEN/);
    expect(() => routerAuthOf({ auth: 'none', tokensFile: 't' }, noEnv)).to.throw(
      /--tokens-file is for --auth tokens, not --auth none/,
    );
    expect(() => routerAuthOf({ ...tokens, authTokenFile: 'x' }, noEnv)).to.throw(
      /--auth-token-file is the single development token/,
    );
    expect(() => routerAuthOf({ auth: 'open' }, noEnv)).to.throw(/--auth open: expected one of/);
  });

  it('readie router logs the tenant of each call from its tokens file, and SIGHUP reloads the file', async () => {
    const dir = tempDir();
    const token = 'cli-tenant-token-0123456789';
    const tokensFile = join(dir, 'tokens');
    const routerTokenFile = join(dir, 'router.token');
    writeFileSync(tokensFile, `tenant before ${token}\n`, { mode: 0o600 });
    writeFileSync(routerTokenFile, 'cli-router-token-0123456789\n', { mode: 0o600 });
    const logDir = join(dir, 'log');
    const child = runReadie(
      [
        'router',
        '--listen',
        '127.0.0.1:0',
        '--log',
        logDir,
        '--insecure',
        '--tokens-file',
        tokensFile,
        '--router-token-file',
        routerTokenFile,
      ],
      { LOG_LEVEL: 'info' },
    );
    try {
      const serving = await child.waitFor(/"msg":"router serving"/, 60_000);
      const { address, auth } = JSON.parse(serving) as { address: string; auth: string };
      expect(auth).to.equal('tokens');
      const client = new ProxyServiceClient(address, credentials.createInsecure());
      const tenantsLogged = async (requestId: string): Promise<unknown> => {
        // No worker: placement refuses the call, after CallRequested names its tenant.
        const outcome = await run(client, 'echo', { requestId }, { metadata: bearer(token) });
        expect(codeOf(outcome)).to.equal('UNAVAILABLE');
        let tenantId: unknown;
        await eventually(() => {
          const event = readLog(logDir).find(
            (e) => e.type === 'CallRequested' && e.requestId === requestId,
          );
          tenantId = event?.type === 'CallRequested' ? event.tenantId : undefined;
          return event !== undefined;
        }, 'CallRequested on disk');
        return tenantId;
      };
      expect(await tenantsLogged('r-before')).to.equal('before');
      writeFileSync(tokensFile, `tenant after ${token}\n`);
      child.process.kill('SIGHUP');
      await child.waitFor(/"msg":"credentials reloaded"/, 30_000);
      expect(await tenantsLogged('r-after')).to.equal('after');
      // A broken file: the reload fails loudly and the credentials in force stay.
      writeFileSync(tokensFile, 'tenant\n');
      child.process.kill('SIGHUP');
      await child.waitFor(/"msg":"credentials reload failed/, 30_000);
      expect(await tenantsLogged('r-kept')).to.equal('after');
      client.close();
    } finally {
      child.process.kill('SIGTERM');
      await child.exited;
    }
  });
});
