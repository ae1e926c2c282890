/**
 * `readie ui`: a read-only web dashboard of the cluster (docs/dashboard.md), served on loopback by
 * default, that asks the router's AdminService with an operator credential: workers with their
 * slots and memory, recent calls with filters, one call's timeline, pins and residency, redrawn
 * every `--interval`. A tenant's token is refused before anything is served.
 */
import { Option, type Command } from 'commander';
import { status as Status } from '@grpc/grpc-js';
import { ConfigurationError, ReadieError } from '../../client/errors.js';
import type { StatusResponse } from '../../proto/gen/readie/v1/admin.js';
import { ConfigError } from '../../shared/config.js';
import { parseHostPort, type HostPort } from '../../shared/host-port.js';
import { printableLines } from '../../shared/printable.js';
import { parseDuration, UnitParseError } from '../../shared/units.js';
import {
  adminConnection,
  credentialHint,
  ROUTER_FLAG_HELP,
  TOKEN_FILE_FLAG_HELP,
  type AdminConnectionFlags,
} from '../admin-connection.js';
import { adminFailure, AdminRouters } from '../admin-routers.js';
import { startUiServer } from './ui-server.js';

interface UiFlags extends AdminConnectionFlags {
  readonly listen: string;
  readonly interval: string;
}

/** The address `readie ui` serves on unless told. */
export const DEFAULT_UI_LISTEN = '127.0.0.1:8470';

function isLoopback(listen: HostPort): boolean {
  return /^(127\.\d+\.\d+\.\d+|localhost|::1)$/.test(listen.host);
}

async function runUi(flags: UiFlags): Promise<number> {
  let routers: AdminRouters;
  let listen: HostPort;
  let refreshMs: number;
  try {
    listen = parseHostPort(flags.listen);
    refreshMs = parseDuration(flags.interval);
    routers = new AdminRouters(adminConnection(flags, process.env));
  } catch (error) {
    if (
      error instanceof ConfigurationError ||
      error instanceof ConfigError ||
      error instanceof UnitParseError
    ) {
      process.stderr.write(`readie ui: ${error.message}\n`);
      return 2;
    }
    throw error;
  }
  // The credential first: a tenant's (or a worker's) token is refused here, before any page.
  try {
    await routers.leader<StatusResponse>(
      (client, metadata, options, callback) =>
        client.status({ includeExpiredSessions: false }, metadata, options, callback),
      10_000,
    );
  } catch (error) {
    routers.close();
    if (!(error instanceof ReadieError)) throw error;
    const hint = credentialHint(flags, routers.connection, process.env);
    const refused =
      error.code === Status.PERMISSION_DENIED || error.code === Status.UNAUTHENTICATED;
    process.stderr.write(
      `readie ui: ${printableLines(adminFailure('readie ui', error, routers.lastAsked, hint))}\n`,
    );
    return refused ? 2 : 1;
  }
  if (!isLoopback(listen)) {
    process.stderr.write(
      `readie ui: warning: serving on ${flags.listen}, not loopback: whoever reaches it sees every tenant's calls through this operator's credential\n`,
    );
  }
  const server = await startUiServer({ listen, routers, refreshMs }).catch((error: Error) => {
    routers.close();
    process.stderr.write(`readie ui: cannot listen on ${flags.listen}: ${error.message}\n`);
    return null;
  });
  if (server === null) return 1;
  process.stdout.write(
    `readie ui: serving http://${server.address}/ (router ${routers.lastAsked})\n`,
  );
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await server.close();
  routers.close();
  return 0;
}

/** Adds `readie ui` to `program`. */
export function addUiCommand(program: Command): void {
  program
    .command('ui')
    .description(
      "a read-only web dashboard of the cluster: workers (slots, memory), recent calls with filters, one call's timeline with its worker's load around it, pins and residency; redrawn every --interval",
    )
    .option(
      '--listen <host:port>',
      'where to serve the page (loopback unless you mean otherwise)',
      DEFAULT_UI_LISTEN,
    )
    .option('--interval <duration>', 'how often the page asks the router again', '2s')
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
      "\nNeeds an operator credential (as readie status does); a tenant's token is refused (exit 2).\n" +
        'The page has no login of its own: keep it on loopback, or behind your own access control.\n' +
        'See docs/dashboard.md.',
    )
    .action(async (flags: UiFlags) => {
      process.exitCode = await runUi(flags);
    });
}
