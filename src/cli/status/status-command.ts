/**
 * `readie status`: the live view of a running router, asked through its `AdminService` with an
 * operator credential, with the routing view (`AdminService.PinStatus`: the pin table, staged pins,
 * residency). A readable page by default (status-sections.ts, pin-sections.ts), the answers as
 * JSON with `--json`, again every `--interval` with `--watch`.
 */
import { Option, type Command } from 'commander';
import { status as Status } from '@grpc/grpc-js';
import { ConfigurationError, ReadieError } from '../../client/errors.js';
import type { ImagesResponse, StatusResponse } from '../../proto/gen/readie/v1/admin.js';
import type { PinStatusResponse } from '../../proto/gen/readie/v1/pins.js';
import { printableLines } from '../../shared/printable.js';
import { parseDuration, UnitParseError } from '../../shared/units.js';
import {
  adminConnection,
  credentialHint,
  ROUTER_FLAG_HELP,
  TOKEN_FILE_FLAG_HELP,
  type AdminConnection,
  type AdminConnectionFlags,
} from '../admin-connection.js';
import { adminFailure, AdminRouters, type RouterReply } from '../admin-routers.js';
import { renderImageCaches } from '../image-command.js';
import { renderPins } from './pin-sections.js';
import { renderRouters, routersJson } from './router-sections.js';
import { renderStatus } from './status-sections.js';

/** What the command line asked for. */
interface StatusFlags extends AdminConnectionFlags {
  readonly json?: boolean;
  readonly watch?: boolean;
  readonly interval: string;
  readonly expired?: boolean;
}

/** How long one router has to answer. */
const ASK_TIMEOUT_MS = 10_000;

/** What one `readie status` shows: every listed router's role, the leader's view of the cluster. */
interface StatusAnswer {
  readonly routers: readonly RouterReply<StatusResponse>[];
  readonly status: StatusResponse;
  /** The routing view; null from a router that has no such RPC (a newer CLI, an older router). */
  readonly pins: PinStatusResponse | null;
  /** Each worker's image cache; null from a router without the RPC (an older router). */
  readonly images: Pick<ImagesResponse, 'workers'> | null;
}

/** The command's failure, already in words. */
class StatusFailure extends Error {
  override readonly name = 'StatusFailure';
}

/**
 * Asks every listed router (in parallel: a dead one costs no more than its timeout) and the one
 * that leads for the routing view (`AdminService.PinStatus`, the same answer as `readie pin
 * status`).
 */
async function ask(
  routers: AdminRouters,
  includeExpiredSessions: boolean,
  hint: string,
): Promise<StatusAnswer> {
  const replies = await Promise.all(
    routers.connection.addresses.map((address) =>
      routers.reply<StatusResponse>(
        address,
        (client, metadata, options, callback) =>
          client.status({ includeExpiredSessions }, metadata, options, callback),
        ASK_TIMEOUT_MS,
      ),
    ),
  );
  const leading = replies.find((reply) => reply.role === 'leads');
  if (leading === undefined) throw new StatusFailure(noAnswer(replies, hint));
  let pins: PinStatusResponse | null;
  try {
    pins = await routers.call<PinStatusResponse>(
      leading.address,
      (client, metadata, options, callback) =>
        client.pinStatus({ tenantId: '' }, metadata, options, callback),
      ASK_TIMEOUT_MS,
    );
  } catch (error) {
    if (!(error instanceof ReadieError)) throw error;
    if (error.code !== Status.UNIMPLEMENTED) {
      throw new StatusFailure(adminFailure('readie status', error, leading.address, hint));
    }
    pins = null;
  }
  return {
    routers: replies,
    status: leading.answer,
    pins,
    images: await imageCaches(routers, leading.address),
  };
}

/**
 * Each worker's image cache (`AdminService.Images`, the same numbers as `readie images`); null
 * from a router that has no such RPC. A refusal here does not hide the rest of the page: it is
 * shown in place of the caches.
 */
async function imageCaches(
  routers: AdminRouters,
  address: string,
): Promise<Pick<ImagesResponse, 'workers'> | null> {
  try {
    const answer = await routers.call<ImagesResponse>(
      address,
      (client, metadata, options, callback) => client.images({}, metadata, options, callback),
      ASK_TIMEOUT_MS,
    );
    // The images themselves are `readie images`'s page; the status page shows the caches.
    return { workers: answer.workers };
  } catch (error) {
    if (!(error instanceof ReadieError)) throw error;
    if (error.code === Status.UNIMPLEMENTED) return null;
    return {
      workers: [{ workerId: '(all)', count: 0, bytes: 0, capacity: 0, error: error.message }],
    };
  }
}

/**
 * Why no router answered: the one router's failure, or with a list, a router's refusal (it
 * answered: a refused credential, say) before the rest, then every router's.
 */
function noAnswer(replies: readonly RouterReply<StatusResponse>[], hint: string): string {
  const failures = replies.flatMap((reply) => (reply.role === 'leads' ? [] : [reply]));
  const [only] = failures;
  if (failures.length === 1 && only) {
    return adminFailure('readie status', only.error, only.address, hint);
  }
  const refused = failures.find((reply) => reply.role === 'failed');
  if (refused) return adminFailure('readie status', refused.error, refused.address, hint);
  return `no router of ${failures.map((reply) => reply.address).join(', ')} leads:\n${renderRouters(replies)}`;
}

/**
 * One answer, as the flags want it printed. JSON keeps every field, defaults included (an empty
 * list, a 0), so scripts can rely on the keys; field names are the proto's in camelCase.
 */
function printed({ routers, status, pins, images }: StatusAnswer, json: boolean): string {
  if (json) {
    return `${JSON.stringify({ ...status, ...(pins === null ? {} : { pins }), ...(images === null ? {} : { imageCaches: images.workers }), routers: routersJson(routers) })}\n`;
  }
  // One router on its own (an LMDB log) needs no line saying so.
  const routerPage = routers.length > 1 ? `Routers\n${renderRouters(routers)}\n` : '';
  const caches = images === null ? '' : `\n${renderImageCaches(images).join('\n')}\n`;
  const page = `${routerPage}${renderStatus(status, Date.now())}${caches}`;
  return pins === null ? page : `${page}\nTenant-pinned versions\n${renderPins(pins)}`;
}

async function runStatus(flags: StatusFlags): Promise<void> {
  let connection: AdminConnection;
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
  const routers = new AdminRouters(connection);
  const hint = credentialHint(flags, connection, process.env);
  const once = async (): Promise<void> => {
    const text = printed(await ask(routers, flags.expired ?? false, hint), flags.json ?? false);
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
    // A router's refusal may quote what a client sent: printable, each line of it.
    process.stderr.write(`readie status: ${printableLines((error as Error).message)}\n`);
    process.exit(1);
  } finally {
    routers.close();
  }
}

/** Adds `readie status` to `program`. */
export function addStatusCommand(program: Command): void {
  program
    .command('status')
    .description(
      "the live cluster from the router that leads (with several routers listed, which leads and which stand by): workers (status, address, load, containers, in flight, last report, probe failures), the admission queue per tenant (calls waiting, oldest wait, slots held beside fair share, weight, cap), the calls that failed on each worker, sessions, reservations, the catalogue revision and the log's seq; each worker's image cache (images, bytes of --image-cache-size: as readie images); then tenant-pinned versions (the table, staged pins, residency: as readie pin status)",
    )
    .option('--router <host:port>', ROUTER_FLAG_HELP)
    .option(
      '--json',
      'print the answer as JSON (AdminService.Status with the PinStatus answer under "pins", each worker\'s image cache under "imageCaches" and each listed router\'s role under "routers", one object a line)',
    )
    .option('--watch', 'ask again every --interval until interrupted')
    .option('--interval <duration>', 'how often --watch asks', '2s')
    .option('--insecure', 'plaintext gRPC (default: READIE_INSECURE; TLS otherwise)')
    .option(
      '--ca-file <file>',
      "CA certificates to trust (default: READIE_CA_FILE, else the system's)",
    )
    .addOption(new Option('--token-file <file>', TOKEN_FILE_FLAG_HELP))
    .option('--state-dir <dir>', "a local cluster's state directory (readie up)", '.readie')
    .option(
      '--expired',
      'also list the ended and expired sessions the router remembers (SESSION_RETENTION)',
    )
    .addHelpText(
      'after',
      '\nNeeds an operator credential (an "operator NAME TOKEN" line of the router\'s tokens file):\n' +
        "--token-file, READIE_OPERATOR_TOKEN, or a local cluster's under --state-dir; a tenant's or a\n" +
        "worker's token is PERMISSION_DENIED, and READIE_AUTH_TOKEN (a tenant's) is never sent.\n" +
        'See docs/router.md, "Admin and tenant services".',
    )
    .action((flags: StatusFlags) => runStatus(flags));
}
