/** The `replay` command: reproduce placement decisions offline from a recorded log. */
import { Command, Option } from 'commander';
import { DamagedArchiveError, EventLogError, InvalidEventError } from '../src/events/index.js';
import { explainCommand } from './commands/explain.js';
import { exportCommand } from './commands/export.js';
import { importCommand } from './commands/import.js';
import { reportCommand } from './commands/report.js';
import { runCommand } from './commands/run.js';
import { stateCommand } from './commands/state.js';
import { verifyCommand } from './commands/verify.js';
import { parseJobs } from './commands/options.js';
import { whatifCommand } from './commands/whatif.js';
import { ReplayInputError } from './io/replay-input-error.js';
import { printableLines } from '../src/shared/printable.js';

// A reader that stops early (`replay run --json | head`) closes the pipe: stop quietly, as Unix
// tools do, instead of dying on EPIPE with a stack trace.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code === 'EPIPE') process.exit(0);
  throw error;
});

const LOG_ARGUMENT =
  'an LMDB log directory, a JetStream stream (nats://HOST:PORT[,HOST:PORT...]/STREAM), a JSONL file, an archive directory or an archive file (detected automatically); several: an archive and the live log, read as one log (replay verify ./archive ./log)';

/** Runs a command action, turning bad input into exit status 2 and a one-line message. */
function action<A extends unknown[]>(
  run: (...args: A) => Promise<number>,
  pathOf: (first: unknown) => string | undefined = logOf,
): (...args: A) => Promise<void> {
  return async (...args: A) => {
    try {
      process.exitCode = await run(...args);
    } catch (error) {
      if (
        error instanceof InvalidEventError ||
        error instanceof EventLogError ||
        error instanceof ReplayInputError
      ) {
        // A bad event is named with the log it is in, when one was given (an archive file's
        // damage names its file already).
        const path = pathOf(args[0]);
        const where =
          path !== undefined &&
          !(error instanceof ReplayInputError) &&
          !(error instanceof DamagedArchiveError)
            ? `${path}: `
            : '';
        process.stderr.write(`replay: ${printableLines(`${where}${error.message}`)}\n`);
        process.exitCode = 2;
        return;
      }
      throw error;
    }
  };
}

/** The one log a command's first argument names (the path, or the only one of a list). */
function logOf(first: unknown): string | undefined {
  if (typeof first === 'string') return first;
  return Array.isArray(first) && first.length === 1 ? (first[0] as string) : undefined;
}

const collect = (value: string, previous: string[] = []) => [...previous, value];
const skipDamagedOption = () =>
  new Option(
    '--skip-damaged',
    'go on past a damaged or missing archive file (each reported on stderr) from the next snapshot, instead of stopping',
  );
const setOption = () =>
  new Option(
    '--set <NAME=VALUE>',
    'override a config value by its env name, e.g. MEMORY_HEADROOM=0.8 (repeatable)',
  ).argParser(collect);

const program = new Command('replay')
  .description(
    'Reproduce readie placement decisions offline from a recorded event log. Never talks to a live cluster.\n' +
      "A log is an LMDB directory (the router's --log), a JetStream stream or a JSONL file, detected automatically;\n" +
      'an archive directory (or file) and the live log together are read as one log.\n' +
      'Exit status: 0 success, 1 verify found a divergence, 2 unreadable, corrupt or out-of-order log, or bad options,\n' +
      '3 verify found a divergence in a log recorded under another version of the placement rules (the rules changed).',
  )
  .showHelpAfterError()
  // Bad options are bad input: exit status 2, like an unreadable log (help still exits 0).
  .exitOverride((error) => process.exit(error.exitCode === 0 ? 0 : 2));

program
  .command('run')
  .description(
    'fold the log in order and decide every call; compare with recorded outcomes, simulate the rest',
  )
  .argument('<log...>', LOG_ARGUMENT)
  .option('--json', 'print one JSON line per call instead of a table')
  .addOption(setOption())
  .addOption(skipDamagedOption())
  .action(
    action((logs: string[], options: { json?: boolean; set?: string[]; skipDamaged?: boolean }) =>
      runCommand(logs, options),
    ),
  );

program
  .command('verify')
  .description(
    'exit 0 when every recorded decision is reproduced exactly by the rules version the log recorded, ' +
      '1 at the first divergence (an incident: printing it and why), ' +
      "3 when --rules current finds that today's rules decide a log of another version otherwise (or the log's version is one this build does not keep)",
  )
  .argument('<log...>', LOG_ARGUMENT)
  .addOption(
    new Option(
      '--rules <which>',
      "recorded: each decision by the rules the log recorded; current: by today's",
    )
      .choices(['recorded', 'current'])
      .default('recorded'),
  )
  .addOption(skipDamagedOption())
  .addOption(
    new Option(
      '--jobs <n>',
      "verify a log of 200,000 events or more in up to n ranges at once, each from one of its snapshots, a thread each (1: one pass; default: the machine's cores less one, at least 1)",
    ),
  )
  .action(
    action(
      (
        logs: string[],
        options: { rules: 'recorded' | 'current'; skipDamaged?: boolean; jobs?: string },
      ) =>
        verifyCommand(logs, {
          ...options,
          jobs: options.jobs === undefined ? undefined : parseJobs(options.jobs),
        }),
    ),
  );

program
  .command('explain')
  .description(
    'the state at one call and the full explanation: workers, filters, ranking, checkpoints, packages',
  )
  .usage('[options] <log...> <requestId>')
  .argument(
    '<log-and-request...>',
    `the log (${LOG_ARGUMENT}), then the request ID of the call (found across an archive and the live log)`,
  )
  .option('--json', 'print the explanation as JSON')
  .addOption(setOption())
  .addOption(skipDamagedOption())
  .action(
    action(
      (
        args: string[],
        options: { json?: boolean; set?: string[]; skipDamaged?: boolean },
      ): Promise<number> => {
        const requestId = args.at(-1);
        if (args.length < 2 || requestId === undefined) {
          throw new ReplayInputError(
            'explain needs a log and a request ID: replay explain <log...> <requestId>',
          );
        }
        return explainCommand(args.slice(0, -1), requestId, options);
      },
      // The log before the request ID, when one was given.
      (first) => (Array.isArray(first) && first.length === 2 ? (first[0] as string) : undefined),
    ),
  );

program
  .command('report')
  .description(
    "a self-contained HTML incident report of one call (opens from disk, no server): its timeline, each placement's table of workers with every filter's verdict, its worker's other calls around it, and what changed around it",
  )
  .argument('<log>', LOG_ARGUMENT)
  .argument('<requestId>', 'the request ID of the call')
  .requiredOption('--html <file>', 'where to write the report')
  .addOption(setOption())
  .action(
    action((log: string, requestId: string, options: { html?: string; set?: string[] }) =>
      reportCommand(log, requestId, options),
    ),
  );

program
  .command('state')
  .description('print the folded cluster state (recorded events only) at a point')
  .argument('<log...>', LOG_ARGUMENT)
  .addOption(skipDamagedOption())
  .option(
    '--at <seq|time>',
    'stop after this seq, or after the last event at or before this ISO-8601 time (default: the end)',
  )
  .option('--json', 'print the state as JSON')
  .action(
    action((logs: string[], options: { at?: string; json?: boolean; skipDamaged?: boolean }) =>
      stateCommand(logs, options),
    ),
  );

program
  .command('export')
  .description(
    'export a seq range of an LMDB or JetStream log, of its archive, or of both, as JSONL; a range starting mid-log begins with a Snapshot so it stands alone',
  )
  .argument(
    '<log...>',
    'an LMDB log directory, a JetStream stream (nats://HOST:PORT[,HOST:PORT...]/STREAM), an archive directory or file, or an archive and the live log',
  )
  .addOption(skipDamagedOption())
  .option('--from <seq>', 'first seq to export (default: the first)')
  .option('--to <seq>', 'last seq to export (default: the last)')
  .option('-o, --output <file.jsonl>', 'write to this file instead of stdout')
  .action(
    action(
      (
        logs: string[],
        options: { from?: string; to?: string; output?: string; skipDamaged?: boolean },
      ) => exportCommand(logs, options),
    ),
  );

program
  .command('import')
  .description(
    'import a JSONL log into a new LMDB log directory or JetStream stream, byte for byte (export gives the same bytes back)',
  )
  .argument('<file.jsonl>', 'a JSONL log')
  .argument(
    '<log>',
    'an empty or new directory, or a new stream (nats://HOST:PORT[,HOST:PORT...]/STREAM)',
  )
  .action(action((file: string, dir: string) => importCommand(file, dir)));

program
  .command('whatif')
  .description(
    'decide every call again under a changed config (--set), or every admission under another quota table (--quota, --quota-file), against the recorded state; list what would change',
  )
  .argument('<log...>', LOG_ARGUMENT)
  .addOption(setOption())
  .addOption(
    new Option(
      '--quota <tenant=ID,weight=N,max-slots=N|none,max-queued=N>',
      "one tenant's quota in the table to decide under (repeatable; fields not named take the defaults: weight 1, no slot cap, max-queued 2000); none alone: the empty table. The given table replaces the log's quota changes from the start",
    ).argParser(collect),
  )
  .option(
    '--quota-file <file>',
    'the quota table to decide under, as `readie quota status --json` prints it (with --quota: both, a tenant named once)',
  )
  .option('--json', 'print one JSON line per change and a summary line')
  .addOption(skipDamagedOption())
  .addHelpText(
    'after',
    '\nWith --quota or --quota-file, the recorded QuotaChanged and QuotaRemoved are replaced by the given\n' +
      'table from the start, and every call, every admission and every point where the router decides\n' +
      'admission is decided again under it against the recorded state (each point apart, as --set does:\n' +
      'not a new history). The output lists each decision that changes: a call placed, queued or refused\n' +
      'otherwise, another call admitted first, none admitted, or a call admitted earlier; and which calls\n' +
      'would wait longer, wait less or be refused. --set and --quota are not combined.',
  )
  .action(
    action(
      (
        logs: string[],
        options: {
          set?: string[];
          quota?: string[];
          quotaFile?: string;
          json?: boolean;
          skipDamaged?: boolean;
        },
      ) => whatifCommand(logs, options),
    ),
  );

await program.parseAsync(process.argv);
