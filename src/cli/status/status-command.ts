/**
 * `readie status`: the live view of a running router, asked through its `AdminService` with an
 * operator credential, with the routing view (`AdminService.PinStatus`: the pin table, staged pins,
 * residency). A readable page by default (status-sections.ts, pin-sections.ts), the answers as
 * JSON with `--json`, again every `--interval` with `--watch`.
 */
import { Option, type Command } from 'commander';
import { status, type ServiceError } from '@grpc/grpc-js';
import { channelCredentials, callMetadata, type Connection } from '../../client/connection.js';
import { ConfigurationError, errorFromStatus } from '../../client/errors.js';
import { AdminServiceClient, type StatusResponse } from '../../proto/gen/readie/v1/admin.js';
import type { PinStatusResponse } from '../../proto/gen/readie/v1/pins.js';
import { parseDuration, UnitParseError } from '../../shared/units.js';
import { adminConnection, localTokenHint, type AdminConnectionFlags } from '../admin-connection.js';
import { renderPins } from './pin-sections.js';
import { renderStatus } from './status-sections.js';

/** What the command line asked for. */
interface StatusFlags extends AdminConnectionFlags {
  readonly json?: boolean;
  readonly watch?: boolean;
  readonly interval: string;
  readonly expired?: boolean;
}

function ask(
  client: AdminServiceClient,
  connection: Connection,
  includeExpiredSessions: boolean,
  hint: string,
): Promise<StatusResponse> {
  return new Promise((resolve, reject) =>
    client.status(
      { includeExpiredSessions },
      callMetadata(connection),
      { deadline: Date.now() + 10_000 },
      (error: ServiceError | null, response) => {
        if (error) reject(statusFailure(error, connection, hint));
        else resolve(response);
      },
    ),
  );
}

/**
 * The routing view (`AdminService.PinStatus`, the same answer as `readie pin status`); null from a
 * router that has no such RPC, so that a newer CLI still shows an older router's status.
 */
function askPins(
  client: AdminServiceClient,
  connection: Connection,
  hint: string,
): Promise<PinStatusResponse | null> {
  return new Promise((resolve, reject) =>
    client.pinStatus(
      { tenantId: '' },
      callMetadata(connection),
      { deadline: Date.now() + 10_000 },
      (error: ServiceError | null, response) => {
        if (error?.code === status.UNIMPLEMENTED) resolve(null);
        else if (error) reject(statusFailure(error, connection, hint));
        else resolve(response);
      },
    ),
  );
}

/** What one `readie status` shows: the cluster, and its routing view when the router has one. */
interface StatusAnswer {
  readonly status: StatusResponse;
  readonly pins: PinStatusResponse | null;
}

/**
 * Why `readie status` failed: the clients' words for the connection (a TLS mismatch, nothing
 * listening), its own for credentials, since it needs an operator's and not a tenant's.
 */
function statusFailure(error: ServiceError, connection: Connection, hint: string): Error {
  if (error.code === status.UNAUTHENTICATED || error.code === status.PERMISSION_DENIED) {
    return new Error(
      `the router at ${connection.address} refused the credential (${status[error.code]}: ${error.details}); ` +
        'readie status needs an operator token: --token-file FILE or READIE_AUTH_TOKEN (an "operator NAME TOKEN" line of its tokens file)' +
        hint,
    );
  }
  return errorFromStatus(error.code, error.details, {
    address: connection.address,
    insecure: connection.insecure,
  });
}

/**
 * One answer, as the flags want it printed. JSON keeps every field, defaults included (an empty
 * list, a 0), so scripts can rely on the keys; field names are the proto's in camelCase.
 */
function printed({ status, pins }: StatusAnswer, json: boolean): string {
  if (json) return `${JSON.stringify(pins === null ? status : { ...status, pins })}\n`;
  const page = renderStatus(status, Date.now());
  return pins === null ? page : `${page}\nTenant-pinned versions\n${renderPins(pins)}`;
}

async function runStatus(flags: StatusFlags): Promise<void> {
  let connection: Connection;
  let intervalMs: number;
  try {
    connection = adminConnection(flags, process.env);
    intervalMs = parseDuration(flags.interval);
  } catch (error) {
    if (error instanceof ConfigurationError || error instanceof UnitParseError) {
      process.stderr.write(`readie status: ${error.message}\n`);
      process.exit(2);
    }
    throw error;
  }
  const client = new AdminServiceClient(connection.address, channelCredentials(connection));
  const hint = localTokenHint(flags);
  const once = async (): Promise<void> => {
    const [status, pins] = await Promise.all([
      ask(client, connection, flags.expired ?? false, hint),
      askPins(client, connection, hint),
    ]);
    const text = printed({ status, pins }, flags.json ?? false);
    // A terminal gets the page redrawn in place; a pipe gets one page (or JSON line) after another.
    if (flags.watch && !flags.json && process.stdout.isTTY) process.stdout.write('\x1b[2J\x1b[H');
    process.stdout.write(text);
  };
  try {
    await once();
    while (flags.watch) {
      await new Promise((resolve) => setTimeout(resolve, intervalMs));
      if (!flags.json && !process.stdout.isTTY) process.stdout.write('\n');
      await once();
    }
  } catch (error) {
    process.stderr.write(`readie status: ${(error as Error).message}\n`);
    process.exit(1);
  } finally {
    client.close();
  }
}

/** Adds `readie status` to `program`. */
export function addStatusCommand(program: Command): void {
  program
    .command('status')
    .description(
      "the live cluster from the running router: workers (status, address, load, containers, in flight, last report, probe failures), sessions, reservations, the catalogue revision and the log's seq; then tenant-pinned versions (the table, staged pins, residency: as readie pin status)",
    )
    .option(
      '--router <host:port>',
      "the router's address, or nginx's in front of it (default: READIE_ADDRESS, else 127.0.0.1:50051)",
    )
    .option(
      '--json',
      'print the answer as JSON (AdminService.Status with the PinStatus answer under "pins", one object a line)',
    )
    .option('--watch', 'ask again every --interval until interrupted')
    .option('--interval <duration>', 'how often --watch asks', '2s')
    .option('--insecure', 'plaintext gRPC (default: READIE_INSECURE; TLS otherwise)')
    .option(
      '--ca-file <file>',
      "CA certificates to trust (default: READIE_CA_FILE, else the system's)",
    )
    .addOption(
      new Option(
        '--token-file <file>',
        'an operator token (first line); default: READIE_AUTH_TOKEN, else <state-dir>/credentials/operator.token of a local cluster',
      ),
    )
    .option('--state-dir <dir>', "a local cluster's state directory (readie up)", '.readie')
    .option('--expired', 'list expired sessions too')
    .addHelpText(
      'after',
      '\nNeeds an operator credential (an "operator NAME TOKEN" line of the router\'s tokens file);\n' +
        'a tenant\'s or a worker\'s token is PERMISSION_DENIED. See docs/router.md, "Admin and tenant services".',
    )
    .action((flags: StatusFlags) => runStatus(flags));
}
