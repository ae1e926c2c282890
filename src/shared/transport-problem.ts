/**
 * What went wrong between two gRPC endpoints when a connection failed, read from the error text
 * grpc-js gives (the Python client reads its own C-core's texts the same way), and the words that
 * say which side speaks what and which setting to change. One table for the clients, the router
 * (dialing workers) and the workers (dialing the router), so each names a TLS mismatch the same way.
 */

/** A transport failure's cause, as far as the error text tells. */
export type TransportProblem =
  /** The dialer speaks TLS, the server plaintext ("wrong version number"). */
  | 'tls-to-plaintext'
  /** The dialer speaks plaintext, the server TLS (found by a probe: the text is ambiguous). */
  | 'plaintext-to-tls'
  /** The server's certificate is not signed by a CA the dialer trusts. */
  | 'untrusted-certificate'
  /** The server's certificate does not name the host dialed. */
  | 'name-mismatch'
  /** The server answered HTTP/1.x: not a gRPC endpoint (or a TLS port spoken to in plaintext). */
  | 'http1'
  /** Nothing listens there. */
  | 'refused'
  /** The host name does not resolve. */
  | 'unresolved'
  /** The connection failed for a reason the text does not tell (a plaintext dial of a TLS port, often). */
  | 'connection-failed'
  /** An established connection was lost before the server answered (it stopped, or the network). */
  | 'connection-lost'
  /** A proxy in front of the server (nginx) answered 502, 503 or 504: nothing answers behind it. */
  | 'bad-gateway';

const PATTERNS: readonly (readonly [TransportProblem, RegExp])[] = [
  ['tls-to-plaintext', /wrong version number|WRONG_VERSION_NUMBER|packet length too long/i],
  [
    'untrusted-certificate',
    /certificate verify failed|unable to verify the first certificate|self[- ]signed certificate|unable to get local issuer certificate|CERTIFICATE_VERIFY_FAILED/i,
  ],
  [
    'name-mismatch',
    /does not match certificate's altnames|Peer name .* is not in peer certificate|IP: .* is not in the cert's list/i,
  ],
  ['http1', /http1\.x server|HTTP\/1\.[01]/i],
  // grpc-js: "Received HTTP status code 502"; grpc's C core: "Received http2 header with status: 502".
  ['bad-gateway', /HTTP status code 50[234]\b|header with status: 50[234]\b/i],
  ['refused', /ECONNREFUSED|Connection refused/i],
  // Not "name resolution" alone: grpc-js ends a deadline's text with how long each step took
  // ("name resolution: 0.004s"), whatever stopped the call.
  ['unresolved', /ENOTFOUND|EAI_AGAIN|DNS resolution failed|Name resolution failed/i],
  // Before the losses: a connection that never came up may say why in the same words.
  [
    'connection-failed',
    /No connection established|failed to connect to all addresses|Failed to connect/i,
  ],
  ['connection-lost', /Connection dropped|Socket closed|ECONNRESET|Connection reset/i],
];

/** The problems that mean nothing reached the server: a call that failed so never started. */
export const NEVER_CONNECTED: ReadonlySet<TransportProblem> = new Set<TransportProblem>([
  'tls-to-plaintext',
  'plaintext-to-tls',
  'untrusted-certificate',
  'name-mismatch',
  'http1',
  'refused',
  'unresolved',
  'connection-failed',
]);

/** The HTTP status a proxy answered (`bad-gateway`), or null. */
export function proxyStatusOf(details: string): number | null {
  const match = /HTTP status code (50[234])\b|header with status: (50[234])\b/i.exec(details);
  const status = match?.[1] ?? match?.[2];
  return status === undefined ? null : Number(status);
}

/** The problem an `UNAVAILABLE` error's text shows, or null when it is not about the connection. */
export function transportProblemOf(details: string): TransportProblem | null {
  for (const [problem, pattern] of PATTERNS) if (pattern.test(details)) return problem;
  return null;
}

/** Who dialed whom, and the settings that change what the dialer speaks. */
export interface TransportSides {
  /** The server, in words: `the router`, `worker w1`. */
  readonly server: string;
  /** The address dialed (`r1.example.com:50051`). */
  readonly address: string;
  /** The setting that holds that address (`READIE_ADDRESS`). */
  readonly addressSetting: string;
  /** The dialer, in words: `this client`, `the router`, `this worker`. */
  readonly dialer: string;
  /** Whether the dialer used TLS. */
  readonly dialerTls: boolean;
  /** The setting that makes the dialer speak plaintext (`READIE_INSECURE=1`). */
  readonly insecureSetting: string;
  /** The setting that makes the dialer speak TLS, when plaintext is what it used. */
  readonly tlsSetting: string;
  /** The setting naming the CA the dialer trusts (`READIE_CA_FILE`). */
  readonly caSetting: string;
  /** What makes the server speak TLS (`--tls-cert and --tls-key`), when it speaks plaintext. */
  readonly serverTlsSetting: string;
}

/** One sentence on `problem`: which side speaks what, and which setting to change. */
export function describeTransportProblem(problem: TransportProblem, sides: TransportSides): string {
  const { dialer, address } = sides;
  const server = `${sides.server} at ${address}`;
  switch (problem) {
    case 'tls-to-plaintext':
      return (
        `${server} speaks plaintext but ${dialer} speaks TLS: serve TLS there ` +
        `(${sides.serverTlsSetting}), or make ${dialer} speak plaintext (${sides.insecureSetting})`
      );
    case 'plaintext-to-tls':
      return (
        `${server} speaks TLS but ${dialer} speaks plaintext: ${sides.tlsSetting}, ` +
        `with ${sides.caSetting} naming the CA that signed its certificate`
      );
    case 'untrusted-certificate':
      return (
        `${server} presented a certificate that ${dialer} does not trust: set ` +
        `${sides.caSetting} to the CA certificate that signed it`
      );
    case 'name-mismatch':
      return (
        `${server} presented a certificate that does not name the host dialed: dial a name the ` +
        'certificate carries, or make its certificate name that host (readie certs)'
      );
    case 'http1':
      return (
        `${server} answered HTTP/1.x, not gRPC: ${sides.dialerTls ? 'check the port' : `if that is a TLS port, ${dialer} must speak TLS (${sides.tlsSetting})`}` +
        ' (nginx must listen with http2)'
      );
    case 'refused':
      return `nothing listens at ${address}: check ${sides.addressSetting}, and that ${sides.server} runs`;
    case 'unresolved':
      return `the host of ${server} does not resolve: check ${sides.addressSetting}`;
    case 'connection-failed':
      return sides.dialerTls
        ? `${dialer} could not connect to ${server}`
        : `${dialer} could not connect to ${server}; if it serves TLS, ${sides.tlsSetting}`;
    case 'connection-lost':
      return `the connection to ${server} was lost before it answered: it stopped or restarted, or the network dropped the connection`;
    case 'bad-gateway':
      return `a proxy at ${address} (nginx) answered that what is behind it is not answering: check that ${sides.server} behind it runs`;
  }
}
