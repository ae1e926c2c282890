/**
 * `readie router`: the router process. Every setting (docs/router.md) is read from its environment
 * variable and can be overridden by the matching flag (`SESSION_WAIT_TIMEOUT` is
 * `--session-wait-timeout`). Credentials (docs/security.md): a tokens file and the router's own
 * token by default, reloaded on SIGHUP; `--auth single-token` and `--auth none` are for development.
 */
import { readFileSync } from 'node:fs';
import { Option, type Command } from 'commander';
import {
  createLogger,
  packageVersion,
  readCatalogueFile,
  readWorkerCa,
  RouterConfigError,
  servingSecurityOf,
  startRouter,
  TokensFileError,
  type Logger,
  type Router,
  type RouterAuth,
} from '../router/index.js';
import {
  checkRetention,
  ConfigError,
  parseSetting,
  resolveConfig,
  SETTING_NAMES,
  SETTINGS,
  type Config,
  type SettingName,
} from '../shared/config.js';
import { routeGrpcLogs } from './grpc-logs.js';
import { isJetStreamLocation } from '../events/index.js';
import { formatDuration, formatSize, parseDuration, UnitParseError } from '../shared/units.js';

/** The flag of a setting: `SESSION_WAIT_TIMEOUT` is `--session-wait-timeout`. */
export function flagOf(name: SettingName): string {
  return `--${name.toLowerCase().replaceAll('_', '-')}`;
}

/** The commander attribute name of a setting's flag (`sessionWaitTimeout`). */
function attributeOf(name: SettingName): string {
  return name.toLowerCase().replace(/_([a-z])/g, (_, letter: string) => letter.toUpperCase());
}

/** Settings workers act on: the router only records them in `RouterStarted`. */
const WORKER_SETTINGS: ReadonlySet<SettingName> = new Set([
  'WORKER_MAX_EXECUTORS',
  'WORKER_UTILIZATION_INTERVAL',
  'DIAL_TOTAL_TIMEOUT',
  'OUTPUT_MAX_CALL_BYTES',
  'OUTPUT_MAX_TOTAL_BYTES',
  'OUTPUT_RETENTION',
]);

const PLACEHOLDERS = { ratio: 'RATIO', size: 'SIZE', duration: 'DURATION', count: 'N' } as const;

function describeDefault(name: SettingName): string {
  const spec = SETTINGS[name];
  switch (spec.kind) {
    case 'duration':
      return formatDuration(spec.default);
    case 'size':
      return formatSize(spec.default);
    case 'ratio':
    case 'count':
      return String(spec.default);
  }
}

/** What the command line asked for. */
interface RouterFlags {
  readonly listen: string;
  readonly log: string;
  readonly archive?: string;
  readonly routerId?: string;
  readonly advertise?: string;
  readonly insecure?: boolean;
  readonly tlsCert?: string;
  readonly tlsKey?: string;
  readonly catalogue?: string;
  readonly metrics?: string;
  readonly workerCa?: string;
  readonly auth: string;
  readonly tokensFile?: string;
  readonly routerTokenFile?: string;
  readonly authTokenFile?: string;
  readonly logLevel: string;
  readonly snapshotEvery: string;
  readonly shutdownGrace: string;
  readonly logWait: string;
  readonly [setting: string]: unknown;
}

/** The config from the environment, with the flags given on the command line over it. */
export function configFromFlags(
  flags: Readonly<Record<string, unknown>>,
  env: Readonly<Record<string, string | undefined>>,
): Config {
  const overrides: Partial<Record<SettingName, number>> = {};
  for (const name of SETTING_NAMES) {
    const text = flags[attributeOf(name)];
    if (typeof text === 'string') overrides[name] = parseSetting(name, text);
  }
  return checkRetention(resolveConfig(env, overrides));
}

/** The authentication modes of `--auth`. */
const AUTH_MODES = ['tokens', 'single-token', 'none'] as const;

/**
 * How the router authenticates, from `--auth` and the files it needs: the tokens mode needs
 * `--tokens-file` and `--router-token-file`; the development modes take neither.
 */
export function routerAuthOf(
  flags: Pick<RouterFlags, 'auth' | 'tokensFile' | 'routerTokenFile' | 'authTokenFile'>,
  env: Readonly<Record<string, string | undefined>>,
): RouterAuth {
  const mode = AUTH_MODES.find((name) => name === flags.auth);
  if (mode === undefined) {
    throw new RouterConfigError(`--auth ${flags.auth}: expected one of ${AUTH_MODES.join(', ')}`);
  }
  const files = [
    ['--tokens-file', flags.tokensFile],
    ['--router-token-file', flags.routerTokenFile],
  ] as const;
  if (mode !== 'tokens') {
    const given = files.find(([, file]) => file !== undefined);
    if (given) {
      throw new RouterConfigError(`${given[0]} is for --auth tokens, not --auth ${mode}`);
    }
  }
  switch (mode) {
    case 'tokens': {
      if (flags.authTokenFile !== undefined) {
        throw new RouterConfigError(
          '--auth-token-file is the single development token (--auth single-token); ' +
            'with --auth tokens, give --tokens-file and --router-token-file',
        );
      }
      const [tokensFile, routerTokenFile] = [flags.tokensFile, flags.routerTokenFile];
      if (tokensFile === undefined || routerTokenFile === undefined) {
        throw new RouterConfigError(
          'the router authenticates its callers with a tokens file: pass --tokens-file FILE ' +
            "(KIND NAME TOKEN lines) and --router-token-file FILE (the router's own token for workers); " +
            'see docs/security.md. For development only: --auth single-token (READIE_AUTH_TOKEN for ' +
            'everything) or --auth none',
        );
      }
      return { mode, tokensFile, routerTokenFile };
    }
    case 'single-token': {
      const token = singleTokenOf(flags, env);
      if (token === undefined) {
        throw new RouterConfigError(
          '--auth single-token needs the token: set READIE_AUTH_TOKEN or pass --auth-token-file FILE',
        );
      }
      return { mode, token };
    }
    case 'none':
      if (flags.authTokenFile !== undefined) {
        throw new RouterConfigError(
          '--auth-token-file is for --auth single-token, not --auth none',
        );
      }
      return { mode };
  }
}

/** The single development token: `--auth-token-file` (first line) over `READIE_AUTH_TOKEN`. */
function singleTokenOf(
  flags: Pick<RouterFlags, 'authTokenFile'>,
  env: Readonly<Record<string, string | undefined>>,
): string | undefined {
  if (flags.authTokenFile !== undefined) {
    let text: string;
    try {
      text = readFileSync(flags.authTokenFile, 'utf8');
    } catch (error) {
      throw new RouterConfigError(
        `--auth-token-file ${flags.authTokenFile}: cannot read it (${(error as Error).message})`,
      );
    }
    const token = text.split(/\r?\n/)[0]?.trim() ?? '';
    if (token === '') {
      throw new RouterConfigError(`--auth-token-file ${flags.authTokenFile}: the file is empty`);
    }
    return token;
  }
  const token = env.READIE_AUTH_TOKEN;
  return token === undefined || token === '' ? undefined : token;
}

function duration(text: string, flag: string): number {
  try {
    return parseDuration(text);
  } catch (error) {
    if (error instanceof UnitParseError) throw new RouterConfigError(`${flag}: ${error.message}`);
    throw error;
  }
}

function wholeNumber(text: string, flag: string): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value < 0) {
    throw new RouterConfigError(`${flag}: "${text}" is not a whole number`);
  }
  return value;
}

/** Starts the router the flags describe and stops it on SIGINT or SIGTERM. */
async function runRouter(flags: RouterFlags): Promise<void> {
  const env = process.env;
  const logger: Logger = createLogger(flags.logLevel);
  routeGrpcLogs(logger);
  let router: Router | undefined;
  try {
    const config = configFromFlags(flags, env);
    const shutdownGrace = duration(flags.shutdownGrace, '--shutdown-grace');
    const logWaitMs = duration(flags.logWait, '--log-wait');
    const security = servingSecurityOf(flags);
    const auth = routerAuthOf(flags, env);
    if (auth.mode !== 'single-token' && env.READIE_AUTH_TOKEN) {
      logger.warn(
        { auth: auth.mode },
        'READIE_AUTH_TOKEN is set but ignored: it is the token of --auth single-token (development only)',
      );
    }
    const jetStream = isJetStreamLocation(flags.log);
    const launch = (listen: string): Promise<Router> =>
      startRouter({
        listen,
        logDir: flags.log,
        ...(flags.archive === undefined ? {} : { archiveDir: flags.archive }),
        security,
        config,
        auth,
        workerCa: flags.workerCa === undefined ? undefined : readWorkerCa(flags.workerCa),
        catalogue: flags.catalogue === undefined ? undefined : readCatalogueFile(flags.catalogue),
        metrics: flags.metrics,
        logger,
        snapshotEvery: wholeNumber(flags.snapshotEvery, '--snapshot-every'),
        logWaitMs,
        version: packageVersion(),
        ...(flags.routerId === undefined ? {} : { routerId: flags.routerId }),
        ...(flags.advertise === undefined ? {} : { advertise: flags.advertise }),
        onFatal: () => {
          const failed = router;
          if (!jetStream || failed === undefined) {
            void failed?.close(0).finally(() => process.exit(1));
            return;
          }
          // A router that lost the lead steps down and stands by again, on the same address,
          // with its state folded afresh from the stream.
          void failed.close(0).then(async () => {
            // NATS may be electing or unreachable: keep trying to stand by.
            for (;;) {
              try {
                router = await launch(failed.address);
                return;
              } catch (error) {
                logger.warn(
                  { err: error, retryInMs: 1_000 },
                  'router could not stand by again yet: retrying',
                );
                await new Promise((resolve) => setTimeout(resolve, 1_000));
              }
            }
          });
        },
      });
    router = await launch(flags.listen);
    let stopping = false;
    const stop = (signal: NodeJS.Signals) => {
      if (stopping) return;
      stopping = true;
      logger.info({ signal, graceMs: shutdownGrace }, 'router stopping');
      (router as Router).close(shutdownGrace).then(
        () => process.exit(0),
        (error: unknown) => {
          logger.error({ err: error }, 'router did not stop cleanly');
          process.exit(1);
        },
      );
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
    process.on('SIGHUP', () => {
      if (auth.mode !== 'tokens') {
        logger.info({ auth: auth.mode }, 'SIGHUP: no credentials files to reload');
        return;
      }
      try {
        (router as Router).reloadCredentials();
      } catch (error) {
        logger.error(
          { problem: (error as Error).message },
          'credentials reload failed: the credentials in force stay in force',
        );
      }
    });
  } catch (error) {
    failStart(error);
  }
}

/**
 * A start that failed: one line on stderr naming the problem and the fix, no stack. A
 * configuration error (a flag, a file, a locked log, a port in use, TLS material) exits 2;
 * anything else exits 1 (`LOG_LEVEL=debug` adds the stack, for a bug report).
 */
function failStart(error: unknown): never {
  const message = error instanceof Error ? error.message : String(error);
  const configuration =
    error instanceof RouterConfigError ||
    error instanceof TokensFileError ||
    error instanceof ConfigError;
  process.stderr.write(
    `readie router: ${configuration ? '' : 'could not start: '}${message.replaceAll('\n', ' ')}\n`,
  );
  if (!configuration && process.env.LOG_LEVEL === 'debug' && error instanceof Error) {
    process.stderr.write(`${error.stack ?? ''}\n`);
  }
  process.exit(configuration ? 2 : 1);
}

/** Adds `readie router` to `program`. */
export function addRouterCommand(program: Command): void {
  const command = program
    .command('router')
    .description(
      'run the router: ProxyService for clients, RegistryService for workers, grpc.health.v1; ' +
        'every fact goes to the event log at --log first',
    )
    .option('--listen <host:port>', 'gRPC address to serve on', '0.0.0.0:50051')
    .requiredOption(
      '--log <location>',
      'event log: an LMDB directory, or a JetStream stream nats://HOST:PORT[,HOST:PORT...]/STREAM that several routers share (one leads, the others stand by); created if missing, recovered if not',
    )
    .option(
      '--archive <dir>',
      'where segments of the log past LOG_RETENTION or LOG_MAX_BYTES go (default: archive inside an LMDB --log; a JetStream log archives nothing without it: give every router the same shared directory)',
    )
    .option('--insecure', 'serve plaintext gRPC (only on a trusted network); TLS is the default')
    .option('--tls-cert <file>', 'PEM certificate chain to serve TLS with')
    .option('--tls-key <file>', 'PEM private key of --tls-cert')
    .option(
      '--catalogue <file>',
      'checkpoint catalogue (JSON, format in docs/catalogue.md) to put in force',
    )
    .option('--metrics <host:port>', 'serve Prometheus metrics over HTTP at GET /metrics')
    .option(
      '--worker-ca <file>',
      'PEM CA certificates: dial workers over TLS trusting these (plaintext without)',
    )
    .option(
      '--auth <mode>',
      'tokens (a tokens file and the router token); single-token or none: development only',
      'tokens',
    )
    .option(
      '--tokens-file <file>',
      'who may call: "KIND NAME TOKEN" lines (tenant, worker, operator); reloaded on SIGHUP',
    )
    .option(
      '--router-token-file <file>',
      "the router's own token, presented to workers (first line); reloaded on SIGHUP",
    )
    .option(
      '--auth-token-file <file>',
      'with --auth single-token: the shared token from this file instead of READIE_AUTH_TOKEN',
    )
    .option(
      '--log-level <level>',
      'fatal, error, warn, info, debug (placement explanations), trace',
      process.env.LOG_LEVEL ?? 'info',
    )
    .option(
      '--snapshot-every <n>',
      'append a Snapshot every this many events at least, more as the state remembers more calls (0 never)',
      '10000',
    )
    .option(
      '--router-id <id>',
      'this router in the leader lease of a JetStream log (default: random)',
    )
    .option(
      '--log-wait <duration>',
      'JetStream log: how long the start waits for a NATS cluster still starting or electing leaders (retrying, with a log line every 5 s) before it fails',
      '2m',
    )
    .option(
      '--advertise <host:port>',
      'JetStream log: the address a standby names when it sends workers and clients to this router (default: --listen)',
    )
    .option('--shutdown-grace <duration>', 'on SIGTERM, how long running calls may finish', '10s');
  for (const name of SETTING_NAMES) {
    const spec = SETTINGS[name];
    command.addOption(
      new Option(
        `${flagOf(name)} <${PLACEHOLDERS[spec.kind].toLowerCase()}>`,
        `${spec.help} (env ${name}, default ${describeDefault(name)}` +
          `${WORKER_SETTINGS.has(name) ? '; a worker setting the router only records' : ''})`,
      ),
    );
  }
  command.addHelpText(
    'after',
    `
Durations: 500ms, 30s, 10m, 1h, 7d (a unit is required). Sizes: 512MiB, 1GiB or a number of bytes.
Credentials (--auth tokens, the default): every call carries "authorization: Bearer <token>".
  --tokens-file names each token's holder: a tenant (ProxyService, TenantService), a worker
  (RegistryService, as that worker ID only) or an operator (AdminService); anything else is
  PERMISSION_DENIED, an unknown token UNAUTHENTICATED. --router-token-file is what the router
  presents to workers. Both are read again on SIGHUP (a bad file keeps the old credentials).
--auth single-token: READIE_AUTH_TOKEN (or --auth-token-file) authorizes everything, and is sent
  to workers. --auth none: no credentials. Both are development shortcuts, never for production.
The router refuses to start without --tls-cert/--tls-key unless --insecure is given.
Every setting, flag and default: docs/settings.md. See docs/router.md and docs/security.md.`,
  );
  command.action((flags: RouterFlags) => runRouter(flags));
}
