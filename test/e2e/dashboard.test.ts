/**
 * The dashboard (`readie ui`) and the HTML incident report (`replay report --html`) in a real
 * headless browser (Debian's chromium driven by playwright-core): each page loads with no console
 * error, shows the cluster's workers and a call's timeline with the right values, shows hostile
 * tenant text as text, and is saved as a screenshot (test-artifacts/).
 */
import { expect } from 'chai';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Locator, type Page } from 'playwright-core';
import {
  bearer,
  chunk,
  callConfig,
  codeOf,
  configMessage,
  exchange,
  startTestRouter,
  type TestRouter,
} from '../support/router/harness.js';
import { ScriptedWorker } from '../support/router/scripted-worker.js';
import { runReadie, type Child } from '../support/processes.js';
import { replayCli, ROOT } from '../support/replay.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';

const TENANT = 'tenant-token-for-dashboard-0123456789';
const OPERATOR = 'operator-token-for-dashboard-0123456789';
const WORKER = 'worker-token-for-dashboard-0123456789';
const ROUTER = 'router-token-for-dashboard-0123456789';

/** Where the screenshots go (kept by CI as the test's artifacts). */
const ARTIFACTS = process.env.TEST_ARTIFACTS ?? join(ROOT, 'test-artifacts');
const CHROMIUM = process.env.READIE_TEST_CHROMIUM ?? '/usr/bin/chromium';

/** A function name a hostile tenant chose: markup that would run script if set as HTML. */
const HOSTILE = '<img src=x onerror="document.title=\'pwned\'">';

function secret(dir: string, name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, `${text}\n`, { mode: 0o600 });
  return path;
}

/** A fresh browser profile with the flags a locked-down CI machine needs. */
async function browser(): Promise<BrowserContext> {
  if (!existsSync(CHROMIUM)) throw new Error(`no browser at ${CHROMIUM}: apt-get install chromium`);
  return chromium.launchPersistentContext(tempDir('readie-chromium-'), {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1280, height: 900 },
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

/** The cells' texts of each row `rows` finds. */
async function cellsOf(rows: Locator): Promise<string[][]> {
  const out: string[][] = [];
  for (let i = 0; i < (await rows.count()); i += 1) {
    out.push(await rows.nth(i).locator('td').allTextContents());
  }
  return out;
}

/**
 * The text of the element `selector` finds once it reads `expected`, or its text after
 * `timeoutMs`: the page refreshes on a timer, so a row may first show a call as it was mid-way
 * (placed, not finished).
 */
async function settledText(
  page: Page,
  selector: string,
  expected: string,
  timeoutMs = 10_000,
): Promise<string> {
  // A locator, not a function evaluated in the page: the page's CSP allows no eval, which
  // Playwright's polling of a function given as text needs.
  await page
    .locator(`${selector}:text-is(${JSON.stringify(expected)})`)
    .waitFor({ timeout: timeoutMs })
    .catch(() => undefined);
  return (await page.locator(selector).textContent()) ?? '';
}

/** Every console error and uncaught exception of `page`. */
function errorsOf(page: Page): string[] {
  const errors: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error') errors.push(message.text());
  });
  page.on('pageerror', (error) => errors.push(String(error)));
  return errors;
}

describe('the dashboard and the HTML report in a headless browser', function () {
  this.timeout(120_000);
  let test: TestRouter;
  let worker: ScriptedWorker;
  let ui: Child | undefined;
  let context: BrowserContext | undefined;
  let dir: string;
  let operatorFile: string;
  let uiAddress: string;
  let hostileId: string;
  let plainId: string;

  before(async () => {
    dir = tempDir('readie-dashboard-');
    mkdirSync(ARTIFACTS, { recursive: true });
    test = await startTestRouter({
      auth: {
        mode: 'tokens',
        tokensFile: secret(
          dir,
          'tokens',
          `tenant acme ${TENANT}\noperator ops ${OPERATOR}\nworker w-ui ${WORKER}`,
        ),
        routerTokenFile: secret(dir, 'router.token', ROUTER),
      },
    });
    operatorFile = secret(dir, 'operator.token', OPERATOR);
    worker = await ScriptedWorker.start({ workerId: 'w-ui' });
    await worker.connect(test.address, { token: WORKER }).reportStatus({ maxContainers: 6 });
    const call = async (fields: Parameters<typeof callConfig>[0]) => {
      const config = callConfig(fields);
      const outcome = await exchange(test.client, [configMessage(config), chunk('echo')], {
        metadata: bearer(TENANT),
      });
      expect(codeOf(outcome), outcome.error?.details).to.equal('OK');
      return config.requestId;
    };
    plainId = await call({ function: 'jobs.score' });
    hostileId = await call({ function: HOSTILE });
    ui = runReadie([
      'ui',
      '--listen',
      '127.0.0.1:0',
      '--interval',
      '500ms',
      '--router',
      test.address,
      '--insecure',
      '--token-file',
      operatorFile,
    ]);
    const line = await ui.waitFor(/serving http:\/\//, 30_000);
    uiAddress = /http:\/\/([^/]+)\//.exec(line)?.[1] ?? '';
    context = await browser();
  });

  after(async () => {
    await context?.close();
    ui?.process.kill('SIGTERM');
    await ui?.exited;
    worker?.stop();
    await test?.close();
    cleanTempDirs();
  });

  it('refuses a tenant token before serving anything', async () => {
    const child = runReadie([
      'ui',
      '--listen',
      '127.0.0.1:0',
      '--router',
      test.address,
      '--insecure',
      '--token-file',
      secret(dir, 'tenant.token', TENANT),
    ]);
    const { code } = await child.exited;
    expect(code).to.equal(2);
    expect(child.stderr()).to.match(/PERMISSION_DENIED.*tenant.*needs an operator token/s);
    expect(child.lines.join('\n')).to.not.match(/serving/);
  });

  it('answers only requests addressed to it (no DNS-rebound host) and GET only', async () => {
    const [host, port] = uiAddress.split(':');
    // fetch may not set Host: a plain request says what a rebound name would.
    const rebound = await new Promise<number>((resolve, reject) =>
      request(
        {
          host,
          port: Number(port),
          path: '/api/status',
          headers: { host: `evil.example:${port}` },
        },
        (answer) => {
          answer.resume();
          resolve(answer.statusCode ?? 0);
        },
      )
        .on('error', reject)
        .end(),
    );
    expect(rebound).to.equal(421);
    const posted = await fetch(`http://${uiAddress}/api/status`, { method: 'POST' });
    expect(posted.status).to.equal(405);
    const page = await fetch(`http://${uiAddress}/`);
    expect(page.headers.get('content-security-policy')).to.match(/script-src 'self'/);
  });

  it("shows the workers and a call's timeline with the right values, tenant text as text, no console error", async () => {
    const page = await context!.newPage();
    const errors = errorsOf(page);
    await page.goto(`http://${uiAddress}/`);
    const workerRow = page.locator('#workers tr[data-worker="w-ui"]');
    await workerRow.waitFor();
    expect(await workerRow.locator('td').first().textContent()).to.equal('w-ui');
    expect(await workerRow.locator('[data-field="slots"]').textContent()).to.match(/ \/ 6$/);
    expect(await workerRow.locator('[data-field="in-flight"]').textContent()).to.equal('0');

    await page.locator('#calls tbody tr').nth(1).waitFor();
    expect(await page.locator('#calls tbody tr').count()).to.equal(2);
    const hostileRow = page.locator(`#calls tr[data-request="${hostileId}"]`);
    expect(await hostileRow.locator('td').nth(2).textContent()).to.equal(HOSTILE);
    await hostileRow.click();
    await page.locator('table.steps tr[data-step="finished"]').waitFor();
    expect(await page.locator('[data-field="function"]').textContent()).to.equal(HOSTILE);
    expect(await page.locator('[data-field="state"]').textContent()).to.equal('succeeded (OK)');
    const steps = await cellsOf(page.locator('table.steps tbody tr'));
    expect(steps.map((s) => s[0])).to.deep.equal(['requested', 'placed', 'bound', 'finished']);
    expect(steps[1]?.[3]).to.match(/^worker w-ui, a new container/);
    expect(steps[3]?.[3]).to.equal('OK');
    expect(await page.locator('svg.timeline-chart').count()).to.equal(1);
    expect(await page.locator('svg.slots-chart').count()).to.equal(1);
    // The hostile name stayed text: no element made of it, no script run.
    expect(await page.locator('main img').count()).to.equal(0);
    expect(await page.title()).to.equal('readie');

    // It updates live: a new call shows up without a reload; this one's function raised.
    const config = callConfig({ function: 'jobs.later' });
    await exchange(test.client, [configMessage(config), chunk('raise KeyError missing key')], {
      metadata: bearer(TENANT),
    });
    const raisedRow = page.locator(`#calls tr[data-request="${config.requestId}"]`);
    await raisedRow.waitFor();
    const raisedState = `#calls tr[data-request="${config.requestId}"] td:nth-child(4)`;
    expect(await settledText(page, raisedState, 'raised')).to.equal('raised');
    expect(await raisedRow.getAttribute('class')).to.match(/\braised\b/);
    await raisedRow.click();
    await page.locator('[data-field="message"]').waitFor();
    expect(await page.locator('[data-field="state"]').textContent()).to.equal('raised (OK)');
    expect(await page.locator('[data-field="message"]').textContent()).to.equal(
      'raised KeyError: missing key',
    );

    // A batch of a map that ended with some of its inputs raised says how many in the table.
    const batch = callConfig({ function: 'jobs.each', inputs: 25 });
    await exchange(test.client, [configMessage(batch), chunk('batch 2')], {
      metadata: bearer(TENANT),
    });
    const batchState = `#calls tr[data-request="${batch.requestId}"] td:nth-child(4)`;
    const finished = 'succeeded, 2 of 25 inputs raised';
    expect(await settledText(page, batchState, finished)).to.equal(finished);

    await page.screenshot({ path: join(ARTIFACTS, 'dashboard.png'), fullPage: true });
    expect(errors).to.deep.equal([]);
    await page.close();
  });

  it('replay report --html: opens from disk with no server, shows the timeline and each filter verdict per worker', async () => {
    const out = join(dir, 'report.html');
    const made = replayCli('report', test.logDir, plainId, '--html', out);
    expect(made.status, made.stderr).to.equal(0);
    const page = await context!.newPage();
    const errors = errorsOf(page);
    const asked: string[] = [];
    page.on('request', (request) => asked.push(request.url()));
    await page.goto(`file://${out}`);
    await page.locator('table.steps tr[data-step="finished"]').waitFor();
    expect(await page.locator('[data-field="request"]').textContent()).to.equal(plainId);
    expect(await page.locator('[data-field="function"]').textContent()).to.equal('jobs.score');
    const verdicts = (await cellsOf(page.locator('table.placement tr[data-worker="w-ui"]'))).map(
      (row) => row.slice(1),
    );
    expect(verdicts.map((v) => v[0])).to.include.members(['memory-headroom', 'container-count']);
    expect(verdicts.find((v) => v[0] === 'memory-headroom')?.[1]).to.equal('pass');
    expect(await page.locator('p.outcome').first().textContent()).to.equal('placed on w-ui');
    expect(await page.locator('svg.timeline-chart').count()).to.equal(1);
    expect(await page.locator('table.nearby tbody tr').count()).to.be.greaterThan(0);
    expect(
      asked.every((url) => url.startsWith('file://')),
      asked.join(' '),
    ).to.equal(true);
    await page.screenshot({ path: join(ARTIFACTS, 'report.png'), fullPage: true });
    expect(errors).to.deep.equal([]);
    await page.close();
  });
});
