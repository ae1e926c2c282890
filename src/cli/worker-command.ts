/**
 * `readie worker`: flags (each also read from its environment variable), startup, SIGTERM, and
 * SIGHUP to reload the token files.
 */
import { totalmem } from 'node:os';
import type { Command } from 'commander';
import { routeGrpcLogs } from './grpc-logs.js';
import { ConfigError, SETTINGS, type SettingName } from '../shared/config.js';
import {
  resolveWorkerOptions,
  Worker,
  WORKER_FLAGS,
  WorkerStartAbandoned,
  WorkerStartupError,
  workerLogger,
  type WorkerFlagValues,
} from '../worker/index.js';

/** Where the worker acts on a setting differently from the router, its own words. */
const WORKER_SETTING_HELP: Partial<Record<SettingName, string>> = {
  EXECUTOR_TTL: 'an idle session container is destroyed after this long',
};

const SETTINGS_HELP = (
  [
    'DEFAULT_MEMORY',
    'WORKER_UTILIZATION_INTERVAL',
    'DIAL_TOTAL_TIMEOUT',
    'EXECUTION_TIMEOUT',
    'EXECUTOR_TTL',
  ] as const
)
  .map((name) => `  ${name.padEnd(28)} ${WORKER_SETTING_HELP[name] ?? SETTINGS[name].help}`)
  .join('\n');

/** Adds the `worker` command to `program`. */
export function addWorkerCommand(program: Command): void {
  const command = program
    .command('worker')
    .description('run a worker: sandboxed containers, checkpoint restores, the Python executor');
  for (const flag of WORKER_FLAGS) command.option(flag.flag, `${flag.help} [${flag.env}]`);
  command
    .option('--log-level <level>', 'pino log level [LOG_LEVEL]', process.env['LOG_LEVEL'] ?? 'info')
    .addHelpText(
      'after',
      `\nSettings read from the environment (every one in docs/settings.md):\n${SETTINGS_HELP}\n` +
        '  READIE_AUTH_TOKEN            with --auth single-token only (development): sent to the router,\n' +
        '                               and required from it on ExecutionService\n' +
        "\nCredentials (docs/security.md): ExecutionService accepts the router's token alone (a client's\n" +
        "or a worker's token is refused); the worker reports with its own token, which names its --id.\n" +
        'SIGHUP reads --token-file and --router-token-file again (a bad file keeps the old ones).\n' +
        "\nRuns as root (namespaces, mounts, cgroups); user code runs as its container's own uid from\n" +
        '--sandbox-uids, with no network but its own loopback unless --network egress (docs/sandbox.md).\n' +
        'On SIGTERM the worker reports REMOVED, lets running calls finish (no time limit of its own:\n' +
        'EXECUTION_TIMEOUT bounds each call), removes its containers and exits; a second signal exits\n' +
        'at once. A SIGTERM while it starts stops it at its next step (or its next wait to register).',
    )
    .action(async (flags: WorkerFlagValues & { logLevel: string }) => {
      let options;
      try {
        options = resolveWorkerOptions(flags, process.env, { totalMemory: totalmem() });
      } catch (error) {
        if (!(error instanceof ConfigError)) throw error;
        process.stderr.write(`readie worker: ${error.message}\n`);
        process.exit(2);
      }
      const log = workerLogger(options.workerId, flags.logLevel);
      routeGrpcLogs(log);
      let worker: Worker | null = null;
      let leaving: NodeJS.Signals | null = null;
      // A signal during startup abandons it at the next step, or while registration waits.
      const abandon = new AbortController();
      const stop = (running: Worker) =>
        running.stop().then(
          () => process.exit(0),
          (error: Error) => {
            log.error({ err: error.message }, 'shutdown failed');
            process.exit(1);
          },
        );
      // Signal handlers come first: a SIGTERM during startup must still clean up.
      const leave = (signal: NodeJS.Signals) => {
        if (leaving) {
          log.warn({ signal }, 'second signal: exiting without waiting');
          process.exit(1);
        }
        leaving = signal;
        log.info({ signal }, 'leaving');
        if (worker) void stop(worker);
        else abandon.abort();
      };
      process.on('SIGTERM', leave);
      process.on('SIGINT', leave);
      process.on('SIGHUP', () => {
        try {
          worker?.reloadCredentials();
        } catch (error) {
          log.error(
            { problem: (error as Error).message },
            'credentials reload failed: the credentials in force stay in force',
          );
        }
      });
      try {
        worker = await Worker.start(options, log, {}, abandon.signal);
      } catch (error) {
        if (error instanceof WorkerStartAbandoned) {
          log.info('stopped before it had started');
          process.exit(0);
        }
        // One line naming the problem and the fix, no stack: exit 2 for what the operator
        // configures (a flag, a file, a port in use), 1 for anything else.
        const configuration = error instanceof WorkerStartupError || error instanceof ConfigError;
        const message = (error as Error).message.replaceAll('\n', ' ');
        process.stderr.write(
          `readie worker: ${configuration ? '' : 'could not start: '}${message}\n`,
        );
        process.exit(configuration ? 2 : 1);
      }
      // Another live process holds this worker ID: the worker has stopped; exit with the reason.
      worker.onDisplaced(() => process.exit(1));
      if (leaving) void stop(worker);
    });
}
