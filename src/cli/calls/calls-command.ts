/**
 * `readie calls`, `readie call <request-id>` and `readie logs <request-id>`: the router's call
 * history (docs/calls.md) through its AdminService, with an operator credential. A readable page
 * by default (call-pages.ts), the answers as JSON with `--json`. Exit 1 when the router refuses
 * (NOT_FOUND names where it looked), 2 for bad input.
 */
import { Option, type Command } from 'commander';
import { ReadieError } from '../../client/errors.js';
import type {
  CallLogsResponse,
  GetCallResponse,
  ListCallsResponse,
} from '../../proto/gen/readie/v1/admin.js';
import { printableLines } from '../../shared/printable.js';
import { parseDuration, UnitParseError } from '../../shared/units.js';
import { ConfigurationError } from '../../client/errors.js';
import {
  adminConnection,
  credentialHint,
  ROUTER_FLAG_HELP,
  TOKEN_FILE_FLAG_HELP,
  type AdminConnectionFlags,
} from '../admin-connection.js';
import { adminFailure, AdminRouters } from '../admin-routers.js';
import { renderCall, renderCallList, renderOutputLine } from './call-pages.js';

/** How long the router has to answer a history question. */
const ASK_TIMEOUT_MS = 15_000;

/** Bad input: exit status 2. */
class CallsUsageError extends Error {
  override readonly name = 'CallsUsageError';
}

interface CallsFlags extends AdminConnectionFlags {
  readonly json?: boolean;
  readonly tenant?: string;
  readonly since?: string;
  readonly failed?: boolean;
  readonly function?: string;
  readonly limit?: string;
}

interface LogsFlags extends AdminConnectionFlags {
  readonly follow?: boolean;
  readonly timestamps?: boolean;
  readonly json?: boolean;
}

/** `--since 10m` in ms; a bare number is refused (it needs a unit). */
export function sinceOf(text: string | undefined): number {
  if (text === undefined) return 0;
  try {
    return parseDuration(text);
  } catch (error) {
    if (error instanceof UnitParseError) throw new CallsUsageError(`--since: ${error.message}`);
    throw error;
  }
}

function limitOf(text: string | undefined): number {
  if (text === undefined) return 0;
  if (!/^\d+$/.test(text) || Number(text) < 1 || Number(text) > 1000) {
    throw new CallsUsageError(`--limit ${text}: expected a whole number from 1 to 1000`);
  }
  return Number(text);
}

/** Runs one command against the router that leads; the exit status. */
async function run(
  command: string,
  flags: AdminConnectionFlags,
  act: (routers: AdminRouters) => Promise<void>,
): Promise<number> {
  let routers: AdminRouters;
  try {
    routers = new AdminRouters(adminConnection(flags, process.env));
  } catch (error) {
    if (!(error instanceof ConfigurationError)) throw error;
    process.stderr.write(`${command}: ${error.message}\n`);
    return 2;
  }
  try {
    await act(routers);
    return 0;
  } catch (error) {
    if (error instanceof CallsUsageError) {
      process.stderr.write(`${command}: ${error.message}\n`);
      return 2;
    }
    if (!(error instanceof ReadieError)) throw error;
    const hint = credentialHint(flags, routers.connection, process.env);
    const failure = adminFailure(command, error, routers.lastAsked, hint);
    process.stderr.write(`${command}: ${printableLines(failure)}\n`);
    return 1;
  } finally {
    routers.close();
  }
}

async function listCalls(flags: CallsFlags): Promise<number> {
  return run('readie calls', flags, async (routers) => {
    const filter = {
      sinceMs: sinceOf(flags.since),
      failed: flags.failed ?? false,
      function: flags.function ?? '',
      limit: limitOf(flags.limit),
    };
    const { answer } = await routers.leader<ListCallsResponse>(
      (client, metadata, options, callback) =>
        client.listCalls({ filter, tenantId: flags.tenant ?? '' }, metadata, options, callback),
      ASK_TIMEOUT_MS,
    );
    process.stdout.write(
      flags.json
        ? `${JSON.stringify(answer)}\n`
        : renderCallList(answer.calls, answer.window, Date.now()),
    );
  });
}

async function showCall(requestId: string, flags: CallsFlags): Promise<number> {
  return run('readie call', flags, async (routers) => {
    const { answer } = await routers.leader<GetCallResponse>(
      (client, metadata, options, callback) =>
        client.getCall({ requestId }, metadata, options, callback),
      ASK_TIMEOUT_MS,
    );
    if (!answer.call) throw new CallsUsageError('the router answered no call');
    process.stdout.write(flags.json ? `${JSON.stringify(answer.call)}\n` : renderCall(answer.call));
  });
}

async function showLogs(requestId: string, flags: LogsFlags): Promise<number> {
  return run('readie logs', flags, async (routers) => {
    // The call first (at the router that leads): it names where the history looked when unknown.
    const { address } = await routers.leader<GetCallResponse>(
      (client, metadata, options, callback) =>
        client.getCall({ requestId }, metadata, options, callback),
      ASK_TIMEOUT_MS,
    );
    const stream = routers
      .clientAt(address)
      .callLogs({ requestId, follow: flags.follow ?? false }, routers.metadata, {
        ...(flags.follow ? {} : { deadline: Date.now() + ASK_TIMEOUT_MS }),
      });
    const stop = () => stream.cancel();
    process.once('SIGINT', stop);
    try {
      await new Promise<void>((resolve, reject) => {
        stream.on('data', (message: CallLogsResponse) => {
          if (flags.json) {
            for (const line of message.lines) process.stdout.write(`${JSON.stringify(line)}\n`);
            if (message.truncated) process.stdout.write(`${JSON.stringify({ truncated: true })}\n`);
            return;
          }
          for (const line of message.lines) {
            process.stdout.write(renderOutputLine(line, flags.timestamps ?? false));
          }
          if (message.truncated) {
            process.stdout.write(
              '[readie] the worker kept no more of this output (OUTPUT_MAX_CALL_BYTES)\n',
            );
          }
        });
        // grpc-js ends the stream and emits its error status in one go; the error's words are
        // made asynchronously, so an end after an error must not settle first (exit 0, silent).
        let failed = false;
        stream.on('end', () => {
          if (!failed) resolve();
        });
        stream.on('error', (error: Error & { code?: number }) => {
          if (error.code === 1) {
            resolve();
            return;
          }
          failed = true;
          routers
            .failure(error as Parameters<AdminRouters['failure']>[0], address)
            .then(reject, reject);
        });
      });
    } finally {
      process.off('SIGINT', stop);
    }
  });
}

/** The connection options every history command takes. */
function withConnection(command: Command): Command {
  return command
    .option('--router <host:port>', ROUTER_FLAG_HELP)
    .option('--insecure', 'plaintext gRPC (default: READIE_INSECURE; TLS otherwise)')
    .option(
      '--ca-file <file>',
      "CA certificates to trust (default: READIE_CA_FILE, else the system's)",
    )
    .addOption(new Option('--token-file <file>', TOKEN_FILE_FLAG_HELP))
    .option('--state-dir <dir>', "a local cluster's state directory (readie up)", '.readie')
    .addHelpText(
      'after',
      '\nNeeds an operator credential (see readie status --help). Tenants read their own calls\n' +
        'through their clients (client.calls(), client.logs(requestId); readie.calls(),\n' +
        'readie.logs(request_id)). See docs/calls.md.',
    );
}

/** Adds `readie calls`, `readie call` and `readie logs` to `program`. */
export function addCallsCommands(program: Command): void {
  withConnection(
    program
      .command('calls')
      .description(
        "recent calls from the router's call history, newest first: request, tenant, function, state (queued, placed, running, succeeded, raised, failed, rejected, expired), a batch's inputs (and how many raised), code, when, how long, how long it waited in the admission queue, where (HISTORY_MAX_CALLS, HISTORY_RETENTION)",
      )
      .option('--tenant <tenant>', "only this tenant's calls")
      .option(
        '--since <duration>',
        'only calls requested within this long (10m, 2h; a unit is needed)',
      )
      .option(
        '--failed',
        'only calls that failed (a code other than OK), whose function raised (state raised), were refused (or left the admission queue unplaced) or expired, and batches some of whose inputs raised',
      )
      .option('--function <name>', 'only calls of this function (module.qualname)')
      .option('--limit <n>', 'at most this many calls (default 100, at most 1000)')
      .option('--json', 'print the answer as JSON (AdminService.ListCalls)'),
  ).action(async (flags: CallsFlags) => {
    process.exitCode = await listCalls(flags);
  });
  withConnection(
    program
      .command('call')
      .argument('<request-id>', 'the call to show')
      .description(
        "one call's whole story from the call history: requested, queued (why) and admitted (after how long) when the admission queue held it, placed (each attempt, a failed dial's error), bound, finished (or left the queue) with its code, message (or the exception its function raised) and duration",
      )
      .option('--json', 'print the answer as JSON (AdminService.GetCall)'),
  ).action(async (requestId: string, flags: CallsFlags) => {
    process.exitCode = await showCall(requestId, flags);
  });
  withConnection(
    program
      .command('logs')
      .argument('<request-id>', 'the call whose output to show')
      .description(
        "a call's output (stdout, stderr as [stderr], readie's notes as [readie], with the traceback of an exception its function raised), as the worker that ran it kept it; escaped for the terminal",
      )
      .option('-f, --follow', 'keep printing new lines until the call ends')
      .option('--timestamps', 'print when the worker received each line')
      .option('--json', 'print each line as JSON ({at, source, text}), unescaped'),
  ).action(async (requestId: string, flags: LogsFlags) => {
    process.exitCode = await showLogs(requestId, flags);
  });
}
