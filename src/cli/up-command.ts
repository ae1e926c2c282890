/** `readie up`: the local cluster (what `npm start` runs). */
import type { Command } from 'commander';
import { readFileSync } from 'node:fs';
import { totalmem } from 'node:os';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  LocalClusterError,
  startLocalCluster,
  type LocalCluster,
  type LocalLogBackend,
} from '../cluster/local-cluster.js';
import { NatsClusterError } from '../cluster/nats-cluster.js';
import { checkHost, describeMissing } from '../cluster/prerequisites.js';
import { CatalogueFormatError, parseCatalogueJson, type Catalogue } from '../events/catalogue.js';
import { TokensFileError } from '../router/security/errors.js';
import { parseTokensFile } from '../router/security/tokens-file.js';
import { formatSize, parseDuration } from '../shared/units.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

interface UpOptions {
  catalogue?: string;
  tokensFile?: string;
  workers: string;
  stateDir: string;
  port: string;
  python: string;
  workerMemory?: string;
  readyTimeout: string;
  log: string;
  natsServer: string;
}

const LOG_BACKENDS: readonly LocalLogBackend[] = ['lmdb', 'jetstream'];

/** A file `readie up` was given that it cannot use: exit 1, its message says why. */
class UpInputError extends Error {
  override readonly name = 'UpInputError';
}

function readInput(flag: string, file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (error) {
    throw new UpInputError(`${flag} ${file}: cannot read it (${(error as Error).message})`);
  }
}

/** `--catalogue FILE`, checked: the catalogue the router and the workers run under. */
function catalogueOf(file: string): Catalogue {
  let catalogue: Catalogue;
  try {
    catalogue = parseCatalogueJson(readInput('--catalogue', file), file);
  } catch (error) {
    if (error instanceof CatalogueFormatError)
      throw new UpInputError(`--catalogue ${error.message}`);
    throw error;
  }
  if (catalogue.flavors.cpu === undefined) {
    throw new UpInputError(
      `--catalogue ${file}: it lists no cpu flavor, and the local workers are cpu workers`,
    );
  }
  return catalogue;
}

/** `--tokens-file FILE`, checked as the router checks its own: the text to add to it. */
function extraTokensOf(file: string): string {
  const text = readInput('--tokens-file', file);
  try {
    parseTokensFile(text, `--tokens-file ${file}`);
  } catch (error) {
    if (error instanceof TokensFileError) throw new UpInputError(error.message);
    throw error;
  }
  return text;
}

/** The checkpoints line: each checkpoint ID, on-demand ones marked. */
function checkpointsOf(catalogue: Catalogue): string {
  return (catalogue.flavors.cpu?.checkpoints ?? [])
    .map((checkpoint) => (checkpoint.onDemand ? `${checkpoint.id} (on demand)` : checkpoint.id))
    .join(', ');
}

/** The machine's memory shared among `workers`, in whole MiB (so it prints as a round size). */
function defaultWorkerMemory(workers: number): number {
  const MiB = 1024 ** 2;
  return Math.floor(totalmem() / workers / MiB) * MiB;
}

/** `NAME pid PID` for every process of the cluster: its NATS nodes, routers and workers. */
function processList(cluster: LocalCluster): string {
  const named: [string, number | undefined][] = [
    ...(cluster.nats?.nodes ?? []).map((node): [string, number | undefined] => [
      node.name,
      node.process.pid,
    ]),
    ...[...cluster.routerProcesses].map(([name, child]): [string, number | undefined] => [
      name,
      child.pid,
    ]),
    ...[...cluster.workerProcesses].map(([name, child]): [string, number | undefined] => [
      name,
      child.pid,
    ]),
  ];
  return named.map(([name, pid]) => `${name} pid ${pid ?? '?'}`).join(', ');
}

function say(line: string): void {
  process.stdout.write(`${line}\n`);
}

async function up(options: UpOptions): Promise<number> {
  const workers = Number(options.workers);
  const port = Number(options.port);
  if (!Number.isInteger(workers) || workers < 1)
    throw new RangeError(`--workers ${options.workers}: expected a whole number >= 1`);
  if (!Number.isInteger(port) || port < 1 || port + workers + 1 > 65535)
    throw new RangeError(`--port ${options.port}: expected a port`);
  const log = options.log as LocalLogBackend;
  if (!LOG_BACKENDS.includes(log))
    throw new RangeError(`--log ${options.log}: expected ${LOG_BACKENDS.join(' or ')}`);
  const jetstream = log === 'jetstream';
  if (process.getuid?.() !== 0) {
    process.stderr.write(
      'readie up: workers need root (they create namespaces, mounts and memory cgroups for each container).\n' +
        'Run it as root, e.g. `sudo npm start`, or in a root container.\n',
    );
    return 1;
  }
  const host = checkHost(options.python, jetstream ? { natsServer: options.natsServer } : {});
  if (host.missing.length > 0) {
    process.stderr.write(`${describeMissing(host.missing)}\n`);
    return 1;
  }
  const catalogue = options.catalogue === undefined ? undefined : catalogueOf(options.catalogue);
  const extraTokens =
    options.tokensFile === undefined ? undefined : extraTokensOf(options.tokensFile);
  const stateDir = resolve(options.stateDir);
  // Each worker offers its share of the machine, not all of it: N workers each offering the
  // whole memory would let the router place N times what the machine has.
  const workerMemory = options.workerMemory ?? String(defaultWorkerMemory(workers));
  const what = jetstream
    ? 'a three-node NATS JetStream cluster, a leading and a standby router'
    : 'a router';
  say(
    `readie: starting ${what} and ${workers} worker${workers === 1 ? '' : 's'} on 127.0.0.1, ` +
      `${options.workerMemory ?? formatSize(Number(workerMemory))} each (state in ${stateDir})...`,
  );
  // The children have their own process groups, so signals reach only this process: the first
  // stops the cluster in order, a second exits at once (the exit handler of startLocalCluster
  // then tells the children still running to exit without waiting).
  const first = new AbortController();
  const signalled = new Promise<string>((done) => {
    const onSignal = (signal: NodeJS.Signals) => {
      if (!first.signal.aborted) {
        first.abort();
        done(signal === 'SIGINT' ? 'interrupted' : 'terminated');
        return;
      }
      say(`readie: ${signal} again: exiting now; workers exit without waiting for their calls`);
      process.exit(1);
    };
    for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, onSignal);
  });
  const cluster = await startLocalCluster({
    workers,
    stateDir,
    port,
    python: options.python,
    numpy: host.numpy,
    ...(catalogue === undefined ? {} : { catalogue }),
    ...(extraTokens === undefined ? {} : { extraTokens }),
    workerMemory,
    readyTimeout: parseDuration(options.readyTimeout),
    signal: first.signal,
    log,
    natsServer: options.natsServer,
    onRouterLost: (message) => say(`readie: ${message}`),
  });
  const routers = jetstream
    ? `routers ${cluster.addresses.join(' (leads), ')} (stands by), log on NATS ${cluster.logDir}`
    : `router ${cluster.address}`;
  say(`readie: local cluster up: ${routers}, workers ${cluster.workerIds.join(', ')}`);
  say(`readie: processes: ${processList(cluster)}`);
  const checkpoints =
    catalogue === undefined
      ? `checkpoint_0${host.numpy ? ', ckpt-numpy' : ' (numpy is not importable: no numpy checkpoint)'}`
      : `${checkpointsOf(catalogue)} (from ${options.catalogue})`;
  say(`readie: checkpoints: ${checkpoints}; logs in ${resolve(stateDir, 'logs')}`);
  say('');
  say(
    `readie: credentials for this run in ${cluster.credentials.dir} (client tenant "local"; ` +
      `operator token in ${cluster.credentials.operatorTokenFile}` +
      `${options.tokensFile === undefined ? '' : `; and those of ${options.tokensFile}`})`,
  );
  say('');
  say('# The environment a client needs (paste into your shell):');
  say(`export READIE_ADDRESS=${cluster.addresses.join(',')}`);
  say('export READIE_INSECURE=1');
  say(`export READIE_AUTH_TOKEN=${cluster.credentials.clientToken}`);
  say(`export PYTHONPATH=${resolve(ROOT, 'python')}`);
  say('');
  say('# Then run an example:');
  say(`${options.python} ${resolve(ROOT, 'examples', 'hello.py')}`);
  say('');
  say(
    `# The event log replays while the cluster runs: node ${resolve(ROOT, 'bin', 'replay.js')} run ${cluster.logDir}`,
  );
  say('readie: Ctrl-C stops the cluster (running calls finish; a second Ctrl-C does not wait).');
  const why = await Promise.race([signalled, cluster.failed]);
  say(
    `readie: ${why}: stopping workers (running calls finish; Ctrl-C again to not wait), then the ${jetstream ? 'routers and NATS' : 'router'}...`,
  );
  await cluster.stop();
  say('readie: stopped; the event log is flushed.');
  return why === 'interrupted' || why === 'terminated' ? 0 : 1;
}

/** Adds `readie up` to the program. */
export function addUpCommand(program: Command): void {
  program
    .command('up')
    .description(
      'start a local cluster: a router and workers on 127.0.0.1, state under .readie/ (what npm start runs)',
    )
    .option('--workers <n>', 'how many workers', '2')
    .option(
      '--catalogue <file>',
      'the checkpoint catalogue the router and workers run under (docs/catalogue.md; it must list a cpu flavor), instead of the default one',
    )
    .option(
      '--tokens-file <file>',
      'more credentials for the router: "KIND NAME TOKEN" lines (tenants, operators; docs/security.md) added to the ones each run makes',
    )
    .option('--state-dir <dir>', 'event log, catalogue, worker state and process logs', '.readie')
    .option(
      '--port <port>',
      'the router port on 127.0.0.1; workers (and with --log jetstream first the standby router) take the next ones',
      '50051',
    )
    .option(
      '--python <path>',
      'the Python for sandboxes and the printed example command',
      '/usr/bin/python3',
    )
    .option(
      '--worker-memory <size>',
      'memory each worker offers, e.g. 4GiB (default: the machine memory divided by --workers)',
    )
    .option(
      '--ready-timeout <duration>',
      'how long to wait for the router to serve and every worker to register',
      '60s',
    )
    .option(
      '--log <backend>',
      'where the event log lives: lmdb (a directory under the state dir) or jetstream (a local three-node NATS cluster, with a standby router)',
      'lmdb',
    )
    .option('--nats-server <path>', 'the nats-server binary for --log jetstream', 'nats-server')
    .addHelpText(
      'after',
      '\nThe router serves plaintext gRPC on loopback only (READIE_INSECURE=1 for clients); put nginx with\n' +
        'TLS in front for anything else (deploy/nginx.conf). Each start makes new credentials under\n' +
        '<state-dir>/credentials/ (0600 files): a client token (printed as READIE_AUTH_TOKEN), an\n' +
        "operator token, a token per worker and the router's own; see docs/security.md.\n" +
        '--tokens-file adds your own lines (tenant acme TOKEN, operator ops TOKEN) to them, and\n' +
        '--catalogue runs the cluster under your catalogue: together they run\n' +
        'docs/tenant-routing.md (tenant-pinned versions) on this machine.\n' +
        'Needs root (namespaces, memory cgroups) and python3-cloudpickle, python3-grpcio,\n' +
        'python3-protobuf, python3-seccomp; it says which command installs what is missing.\n' +
        '\n--log jetstream also starts three nats-server nodes on loopback (apt-get install -y\n' +
        'nats-server), their stores under <state-dir>/nats/ (kept between runs, like the LMDB log),\n' +
        'a leading router on --port and a standby on the next port; the workers report to both\n' +
        "(their ports follow the routers'). Kill the leader and the standby takes over within\n" +
        'LEADER_LEASE (5 s); clients given both addresses (READIE_ADDRESS=a,b) follow it. See\n' +
        'docs/deploy.md.',
    )
    .action(async (options: UpOptions) => {
      try {
        process.exitCode = await up(options);
      } catch (error) {
        // Expected failures say what happened; anything else is a bug, shown with its stack.
        const known =
          error instanceof UpInputError ||
          error instanceof LocalClusterError ||
          error instanceof NatsClusterError ||
          error instanceof RangeError;
        process.stderr.write(
          `readie up: ${known ? (error as Error).message : String((error as Error).stack)}\n`,
        );
        process.exitCode = 1;
      }
    });
}
