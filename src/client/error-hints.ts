/**
 * What a failed call's cause is, and the one hint per cause that ends its message: the table a
 * user reads when a call fails (docs/clients.md, "Errors"). A call that reached a worker never
 * gets a hint about the router's address; a TLS mismatch says which side speaks what and which
 * setting to change. The Python client keeps the same table (python/readie/_error_hints.py).
 */
import { status as Status } from '@grpc/grpc-js';
import {
  KILLED_OUT_OF_MEMORY,
  KILLED_TRAILER,
  neverFitsTrailer,
  neverStarted,
  type CallTrailers,
} from '../shared/call-trailers.js';
import {
  describeTransportProblem,
  NEVER_CONNECTED,
  proxyStatusOf,
  transportProblemOf,
  type TransportProblem,
} from '../shared/transport-problem.js';
import { formatDuration, formatSize } from '../shared/units.js';

/** Why a call failed, as far as its status, trailers and the connection tell. */
export type ErrorCause =
  | { readonly kind: 'out-of-memory'; readonly budget: number | null }
  /** The router reached worker `workerId`, which failed or could not be reached. */
  | { readonly kind: 'worker'; readonly workerId: string }
  | { readonly kind: 'no-workers' }
  | { readonly kind: 'no-room' }
  /** No ready worker could ever take the call (`readie-never-fits`): final, never retried. */
  | { readonly kind: 'never-fits' }
  /** A pinned call shed (its version is loading, or its subset is full), with the hint. */
  | { readonly kind: 'shed'; readonly retryAfterMs: number }
  | { readonly kind: 'session-busy' }
  | { readonly kind: 'session-expired' }
  | { readonly kind: 'router-stopping' }
  | { readonly kind: 'transport'; readonly problem: TransportProblem }
  /** A proxy in front of the router (nginx) answered `status` (502, 503, 504): the router is not answering it. */
  | { readonly kind: 'proxy-upstream'; readonly status: number }
  | { readonly kind: 'unauthenticated' }
  | { readonly kind: 'permission-denied' }
  | { readonly kind: 'unimplemented' }
  | { readonly kind: 'other' };

/** What the cause is read from. */
export interface FailedCall {
  readonly code: Status;
  readonly details: string;
  readonly trailers: CallTrailers;
  /** Whether the client spoke plaintext (READIE_INSECURE). */
  readonly insecure: boolean;
  /** A plaintext client's probe found that the address speaks TLS. */
  readonly speaksTls?: boolean;
  /** A shed's retry-after hint in ms (`retry-after-ms`, or `google.rpc.RetryInfo`), if any. */
  readonly retryAfterMs?: number;
}

/**
 * The problems a plaintext dial of a TLS port can show (the connection just closes, or nginx
 * answers HTTP/1.1 400): a client that spoke plaintext asks the address whether it speaks TLS.
 */
export const AMBIGUOUS: ReadonlySet<TransportProblem> = new Set<TransportProblem>([
  'connection-failed',
  'connection-lost',
  'http1',
]);

/** Whether nothing of the call reached the cluster: the connection never came up. */
export function neverSent(cause: ErrorCause): boolean {
  return cause.kind === 'transport' && NEVER_CONNECTED.has(cause.problem);
}

/** The cause of a failed call. */
export function causeOf(call: FailedCall): ErrorCause {
  const { code, details, trailers } = call;
  if (code === Status.RESOURCE_EXHAUSTED && trailers[KILLED_TRAILER] === KILLED_OUT_OF_MEMORY) {
    const budget = Number(trailers['readie-memory-budget']);
    return { kind: 'out-of-memory', budget: Number.isFinite(budget) && budget > 0 ? budget : null };
  }
  if (code === Status.RESOURCE_EXHAUSTED && neverFitsTrailer(trailers))
    return { kind: 'never-fits' };
  if (code === Status.RESOURCE_EXHAUSTED && call.retryAfterMs !== undefined) {
    return { kind: 'shed', retryAfterMs: call.retryAfterMs };
  }
  const worker = /^worker (\S+?):? /.exec(details);
  if (worker?.[1]) return { kind: 'worker', workerId: worker[1] };
  switch (code) {
    case Status.UNAVAILABLE: {
      if (details.startsWith('no workers available')) return { kind: 'no-workers' };
      if (details.includes('shutting down')) return { kind: 'router-stopping' };
      const problem = transportProblemOf(details);
      if (problem === null) return { kind: 'other' };
      // A plaintext dial of a TLS port just closes (or, at nginx, answers HTTP/1.1 400).
      if (AMBIGUOUS.has(problem) && call.insecure && call.speaksTls) {
        return { kind: 'transport', problem: 'plaintext-to-tls' };
      }
      if (problem === 'bad-gateway') {
        return { kind: 'proxy-upstream', status: proxyStatusOf(details) ?? 502 };
      }
      return { kind: 'transport', problem };
    }
    case Status.RESOURCE_EXHAUSTED:
      return details.startsWith('session is busy') ? { kind: 'session-busy' } : { kind: 'no-room' };
    case Status.NOT_FOUND:
      return { kind: 'session-expired' };
    case Status.UNAUTHENTICATED:
      return { kind: 'unauthenticated' };
    case Status.PERMISSION_DENIED:
      return { kind: 'permission-denied' };
    case Status.UNIMPLEMENTED:
      return { kind: 'unimplemented' };
    default:
      return { kind: 'other' };
  }
}

/** The retry advice every hint of a call that failed on a worker ends with. */
function retryAdvice(trailers: CallTrailers): string {
  return neverStarted(trailers)
    ? 'the function never started, so the call can be retried as it is'
    : 'the function may have run: retry only if running it twice is safe';
}

/** The one hint for `cause` (undefined: the message says enough). */
export function hintFor(
  cause: ErrorCause,
  context: {
    readonly address: string;
    readonly insecure: boolean;
    readonly trailers: CallTrailers;
  },
): string | undefined {
  switch (cause.kind) {
    case 'out-of-memory':
      return (
        `the function ran and was killed for using more than its memory budget` +
        `${cause.budget === null ? '' : ` of ${formatSize(cause.budget)}`}: ask for more ` +
        "(the memory option, e.g. memory: '2GiB')"
      );
    case 'worker':
      return (
        `the router placed the call on worker ${cause.workerId}, which failed it; ` +
        `${retryAdvice(context.trailers)} (the operator sees the worker in readie status)`
      );
    case 'no-workers':
      return 'the router runs but has no worker that can take the call: ask the operator (readie status shows the workers)';
    case 'no-room':
      return 'every worker is full for this budget now: retry later, or ask for less memory';
    case 'never-fits':
      return 'no worker of this cluster can ever take it as asked: ask for less (memory, GPU memory) or for another flavor; the client does not retry it';
    case 'shed':
      return (
        `the router sheds a pinned call while its version is loading or its workers are full: ` +
        `retry after ${formatDuration(cause.retryAfterMs)} (the client retries sheds on its own, ` +
        "within the call's timeout, up to shedRetries times)"
      );
    case 'session-busy':
      return "the session's previous call is still running: calls of one session run one at a time";
    case 'session-expired':
      return 'its container is gone; start a new session';
    case 'router-stopping':
      return 'the router is restarting or stopping: retry once it is back';
    case 'transport':
      if (cause.problem === 'connection-lost') {
        return (
          `the connection to the router (or nginx) at ${context.address} was lost during the call: ` +
          'it stopped or restarted, or the network dropped it; the function may have run: retry ' +
          'only if running it twice is safe'
        );
      }
      return describeTransportProblem(cause.problem, {
        server: 'the router (or nginx)',
        address: context.address,
        addressSetting: 'READIE_ADDRESS',
        dialer: 'this client',
        dialerTls: !context.insecure,
        insecureSetting: 'READIE_INSECURE=1',
        tlsSetting: 'unset READIE_INSECURE',
        caSetting: 'READIE_CA_FILE',
        serverTlsSetting: "the router's --tls-cert/--tls-key, or nginx's ssl_certificate",
      });
    case 'proxy-upstream':
      return (
        `nginx (or another proxy) at ${context.address} answered HTTP ${cause.status}: the router behind it is not ` +
        "answering (stopped, restarting, or not at the address nginx's grpc_pass names); the call may " +
        'have reached it: retry only if running it twice is safe'
      );
    case 'unauthenticated':
      return "set READIE_AUTH_TOKEN to your client token (the cluster's operator gives it)";
    case 'permission-denied':
      return 'use a tenant (client) token: worker and operator tokens may not run calls';
    case 'unimplemented':
      return 'check that READIE_ADDRESS points at a readie router (or nginx in front of one)';
    case 'other':
      return undefined;
  }
}

/** Distributions whose name is not the module they provide (the usual ones). */
const DISTRIBUTION_OF: Readonly<Record<string, string>> = {
  sklearn: 'scikit-learn',
  skimage: 'scikit-image',
  cv2: 'opencv-python',
  PIL: 'Pillow',
  yaml: 'PyYAML',
  bs4: 'beautifulsoup4',
  dateutil: 'python-dateutil',
};

/** Modules of readie itself: missing, they mean a wrong checkpoint, not a missing package. */
const READIE_MODULES: ReadonlySet<string> = new Set(['readie_checkpoint', 'readie_executor']);

/**
 * The hint of a remote `ModuleNotFoundError`: the package option that installs the module with
 * the call (the Python client says `@readie.remote(packages=[...])`: python/readie/_error_hints.py).
 */
export function missingModuleHint(type: string, message: string): string | undefined {
  if (type !== 'ModuleNotFoundError') return undefined;
  const module = /No module named '([^']+)'/.exec(message)?.[1]?.split('.')[0];
  if (module === undefined || READIE_MODULES.has(module)) return undefined;
  const distribution = DISTRIBUTION_OF[module] ?? module;
  return (
    `the worker's Python has no module ${module}: if a distribution on the package index provides ` +
    `it, install it with the call (packages: ['${distribution}'])` +
    (distribution === module ? '' : `; ${module} comes from ${distribution}`)
  );
}
