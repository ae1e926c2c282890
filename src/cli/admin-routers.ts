/**
 * The routers an operator command talks to (`--router a,b` or READIE_ADDRESS): one AdminService
 * stub per address, each answer or failure read the way the clients read theirs
 * (`errorFromStatus`: a TLS mismatch or nothing listening named, with the setting to change), and
 * the list followed as the clients follow it (src/client/router-list.ts): a standby's refusal moves
 * to the leader it names when that address is listed, an unreachable router to the next address.
 * An operator token is never sent to an address the operator did not list.
 */
import {
  status as Status,
  type CallOptions,
  type Metadata,
  type ServiceError,
} from '@grpc/grpc-js';
import { callMetadata, channelCredentials } from '../client/connection.js';
import { errorFromStatus, ReadieError } from '../client/errors.js';
import { unsentRefusal } from '../client/router-list.js';
import { AMBIGUOUS } from '../client/error-hints.js';
import { speaksTls } from '../net/tls-probe.js';
import { AdminServiceClient } from '../proto/gen/readie/v1/admin.js';
import { transportProblemOf } from '../shared/transport-problem.js';
import type { AdminConnection } from './admin-connection.js';

/** One unary AdminService call, as grpc-js's generated stubs take it. */
export type AdminCall<Res> = (
  client: AdminServiceClient,
  metadata: Metadata,
  options: Partial<CallOptions>,
  callback: (error: ServiceError | null, response: Res) => void,
) => unknown;

/** What one router said to an admin call. */
export type RouterReply<Res> =
  | { readonly address: string; readonly role: 'leads'; readonly answer: Res }
  | {
      readonly address: string;
      readonly role: 'stands by';
      readonly leader: string | undefined;
      readonly error: ReadieError;
    }
  | {
      readonly address: string;
      readonly role: 'unreachable' | 'failed';
      readonly error: ReadieError;
    };

/** The `readie-*` trailers of a failed admin call. */
function trailersOf(metadata: Metadata | undefined): Record<string, string> {
  const trailers: Record<string, string> = {};
  for (const [name, value] of Object.entries(metadata?.getMap() ?? {})) {
    if (name.startsWith('readie-')) trailers[name] = String(value);
  }
  return trailers;
}

/** The routers of one operator command. */
export class AdminRouters {
  readonly connection: AdminConnection;
  readonly #clients = new Map<string, AdminServiceClient>();
  readonly #metadata: Metadata;
  /** The address of the last router asked (where a failure of `leader` came from). */
  lastAsked: string;

  constructor(connection: AdminConnection) {
    this.connection = connection;
    this.#metadata = callMetadata(connection);
    this.lastAsked = connection.address;
  }

  /** The AdminService stub for `address` (for a streaming call the helpers here do not make). */
  clientAt(address: string): AdminServiceClient {
    return this.#client(address);
  }

  /** The metadata every call sends (the operator's credential). */
  get metadata(): Metadata {
    return this.#metadata;
  }

  /** The error a failed call at `address` rejects with, in the clients' words (public form). */
  failure(error: ServiceError, address: string): Promise<ReadieError> {
    return this.#failure(error, address);
  }

  #client(address: string): AdminServiceClient {
    let client = this.#clients.get(address);
    if (client === undefined) {
      client = new AdminServiceClient(address, channelCredentials(this.connection));
      this.#clients.set(address, client);
    }
    return client;
  }

  /** The error a failed call at `address` rejects with, in the clients' words. */
  async #failure(error: ServiceError, address: string): Promise<ReadieError> {
    const insecure = this.connection.insecure;
    const problem = error.code === Status.UNAVAILABLE ? transportProblemOf(error.details) : null;
    const ambiguous = insecure && problem !== null && AMBIGUOUS.has(problem);
    return errorFromStatus(error.code, error.details, {
      address,
      insecure,
      trailers: trailersOf(error.metadata),
      speaksTls: ambiguous ? await speaksTls(address) : false,
      cause: error,
    });
  }

  /** One call at `address`; rejects with a ReadieError. */
  call<Res>(address: string, send: AdminCall<Res>, timeoutMs: number): Promise<Res> {
    return new Promise((resolve, reject) =>
      send(
        this.#client(address),
        this.#metadata,
        { deadline: Date.now() + timeoutMs },
        (error, response) => {
          if (error) this.#failure(error, address).then(reject, reject);
          else resolve(response);
        },
      ),
    );
  }

  /** What the router at `address` says to the call. */
  async reply<Res>(
    address: string,
    send: AdminCall<Res>,
    timeoutMs: number,
  ): Promise<RouterReply<Res>> {
    try {
      return { address, role: 'leads', answer: await this.call(address, send, timeoutMs) };
    } catch (error) {
      if (!(error instanceof ReadieError)) throw error;
      const refusal = unsentRefusal(error);
      if (refusal === 'standby') return { address, role: 'stands by', leader: error.leader, error };
      return { address, role: refusal === 'unreachable' ? 'unreachable' : 'failed', error };
    }
  }

  /**
   * The call at the router that leads: the list's first address, then where each refusal before
   * anything ran points (a standby's named leader when listed, else the next address), each
   * address tried once. Rejects with the failure of a router that answered with an error (the
   * call may have run there), else with the last refusal.
   */
  async leader<Res>(
    send: AdminCall<Res>,
    timeoutMs: number,
  ): Promise<{ address: string; answer: Res }> {
    const addresses = this.connection.addresses;
    const tried = new Set<string>();
    let address = addresses[0] as string;
    let last: ReadieError | undefined;
    while (!tried.has(address)) {
      tried.add(address);
      this.lastAsked = address;
      const reply = await this.reply(address, send, timeoutMs);
      if (reply.role === 'leads') return { address, answer: reply.answer };
      if (reply.role === 'failed') throw reply.error;
      last = reply.error;
      const named = reply.role === 'stands by' ? reply.leader : undefined;
      const next =
        named !== undefined && addresses.includes(named) && !tried.has(named)
          ? named
          : addresses.find((candidate) => !tried.has(candidate));
      if (next === undefined) break;
      address = next;
    }
    throw last as ReadieError;
  }

  /** Closes every stub made. */
  close(): void {
    for (const client of this.#clients.values()) client.close();
  }
}

/** The codes whose message is the clients' (about reaching the router), not the router's refusal. */
const CONNECTION_CODES: ReadonlySet<Status | undefined> = new Set([
  Status.UNAVAILABLE,
  Status.DEADLINE_EXCEEDED,
  undefined,
]);

/**
 * Why an operator command failed, in one line: a refused credential says which credential the
 * command needs and where a local one is (`hint`); a router that could not be reached gets the
 * clients' words (a TLS mismatch, nothing listening); any other refusal is the router's code and
 * message.
 */
export function adminFailure(
  command: string,
  error: ReadieError,
  address: string,
  hint: string,
): string {
  if (error.code === Status.UNAUTHENTICATED || error.code === Status.PERMISSION_DENIED) {
    return (
      `the router at ${address} refused the credential (${error.codeName}: ${error.details}); ` +
      `${command} needs an operator token: --token-file FILE or READIE_OPERATOR_TOKEN ` +
      '(an "operator NAME TOKEN" line of the router\'s tokens file)' +
      hint
    );
  }
  if (error.standby) {
    const leader = error.leader ?? "the leading router's address";
    return `${error.message}; add ${leader} to the list (--router or READIE_ADDRESS, comma-separated)`;
  }
  if (CONNECTION_CODES.has(error.code)) return error.message;
  if (error.code === Status.UNIMPLEMENTED) {
    return `${error.codeName}: ${error.details}; check that --router (or READIE_ADDRESS) names a readie router, or nginx in front of one`;
  }
  return `${error.codeName}: ${error.details}`;
}
