/**
 * What the operator commands that change the router's tables (`readie pin`, `readie quota`) share:
 * the connection flags, one call to the router that leads, and how each outcome exits (0 done,
 * 1 refused by the router with its code and message, 2 bad options).
 */
import type { Command } from 'commander';
import { ReadieError } from '../client/errors.js';
import { printableLines } from '../shared/printable.js';
import {
  adminConnection,
  credentialHint,
  ROUTER_FLAG_HELP,
  TOKEN_FILE_FLAG_HELP,
  type AdminConnectionFlags,
} from './admin-connection.js';
import { adminFailure, AdminRouters, type AdminCall } from './admin-routers.js';

/** Options every such command takes. */
export interface AdminCommandFlags extends AdminConnectionFlags {
  readonly json?: boolean;
}

/** A usage or input error: exit status 2. */
export class AdminUsageError extends Error {
  override readonly name = 'AdminUsageError';
}

/** How long the router has to answer one command. */
const ADMIN_TIMEOUT_MS = 30_000;

/** Sends one call to the router that leads (following the router list); the answer. */
export type Send = <Res>(call: AdminCall<Res>) => Promise<Res>;

/** `--expect-revision`'s value, or undefined when not given. */
export function revisionOf(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  if (!/^\d+$/.test(text))
    throw new AdminUsageError(`--expect-revision ${text}: expected a revision number`);
  return Number(text);
}

/** Runs one command as `name` (`readie pin`); the exit status. */
export async function runAdmin(
  name: string,
  flags: AdminCommandFlags,
  act: (send: Send) => Promise<void>,
): Promise<number> {
  let routers: AdminRouters;
  try {
    routers = new AdminRouters(adminConnection(flags, process.env));
  } catch (error) {
    process.stderr.write(`${name}: ${(error as Error).message}\n`);
    return 2;
  }
  const send: Send = async (call) => (await routers.leader(call, ADMIN_TIMEOUT_MS)).answer;
  try {
    await act(send);
    return 0;
  } catch (error) {
    if (error instanceof AdminUsageError) {
      process.stderr.write(`${name}: ${error.message}\n`);
      return 2;
    }
    if (!(error instanceof ReadieError)) throw error;
    const hint = credentialHint(flags, routers.connection, process.env);
    process.stderr.write(
      `${name}: ${printableLines(adminFailure(name, error, routers.lastAsked, hint))}\n`,
    );
    return 1;
  } finally {
    routers.close();
  }
}

/** Adds the connection flags and `--json` to `command`. */
export function withConnection(command: Command): Command {
  return command
    .option('--router <host:port>', ROUTER_FLAG_HELP)
    .option('--token-file <file>', TOKEN_FILE_FLAG_HELP)
    .option('--insecure', 'plaintext gRPC (default: READIE_INSECURE; TLS otherwise)')
    .option(
      '--ca-file <file>',
      "CA certificates to trust (default: READIE_CA_FILE, else the system's)",
    )
    .option('--state-dir <dir>', "a local cluster's state directory (readie up)", '.readie')
    .option('--json', 'print the answer as JSON');
}

/** A command's action: its handler's exit status, and a usage error as exit status 2. */
export const adminAction =
  <A extends unknown[]>(name: string, handler: (...args: A) => Promise<number>) =>
  async (...args: A) => {
    try {
      process.exitCode = await handler(...args);
    } catch (error) {
      if (!(error instanceof AdminUsageError)) throw error;
      process.stderr.write(`${name}: ${error.message}\n`);
      process.exitCode = 2;
    }
  };
