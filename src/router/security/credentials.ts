/**
 * Transport security. The router serves TLS unless told `--insecure`; it dials workers over TLS
 * when given the CA that signed their certificates, and in plaintext otherwise.
 */
import { credentials, ServerCredentials, type ChannelCredentials } from '@grpc/grpc-js';
import { readFileSync } from 'node:fs';
import { RouterConfigError } from '../../core/errors.js';
import { caBundleProblem, tlsPairProblem } from '../../host/tls-material.js';

/** How the router serves: TLS with a certificate chain and key, or plaintext when asked for. */
export type ServingSecurity =
  | { readonly kind: 'tls'; readonly certChain: Buffer; readonly privateKey: Buffer }
  | { readonly kind: 'insecure' };

/** The TLS material or `--insecure` choice from the command line, checked. */
export function servingSecurityOf(flags: {
  insecure?: boolean | undefined;
  tlsCert?: string | undefined;
  tlsKey?: string | undefined;
}): ServingSecurity {
  const { insecure = false, tlsCert, tlsKey } = flags;
  if (insecure && (tlsCert !== undefined || tlsKey !== undefined)) {
    throw new RouterConfigError('--insecure contradicts --tls-cert/--tls-key: choose one');
  }
  if (insecure) return { kind: 'insecure' };
  if (tlsCert === undefined || tlsKey === undefined) {
    throw new RouterConfigError(
      'the router serves TLS by default: pass --tls-cert FILE and --tls-key FILE ' +
        '(PEM certificate chain and private key), or --insecure to serve plaintext on a trusted network',
    );
  }
  const certChain = readPem(tlsCert, '--tls-cert');
  const privateKey = readPem(tlsKey, '--tls-key');
  const problem = tlsPairProblem(certChain, privateKey, {
    certFile: tlsCert,
    keyFile: tlsKey,
    certFlag: '--tls-cert',
    keyFlag: '--tls-key',
  });
  if (problem !== null) throw new RouterConfigError(problem);
  return { kind: 'tls', certChain, privateKey };
}

/** The CA bundle of `--worker-ca`, read and checked to hold a certificate. */
export function readWorkerCa(path: string): Buffer {
  const pem = readPem(path, '--worker-ca');
  const problem = caBundleProblem(pem, path, '--worker-ca');
  if (problem !== null) throw new RouterConfigError(problem);
  return pem;
}

/** Reads a PEM file named by a flag, with an error naming the flag and the file. */
export function readPem(path: string, flag: string): Buffer {
  try {
    return readFileSync(path);
  } catch (error) {
    throw new RouterConfigError(`${flag} ${path}: cannot read it (${(error as Error).message})`);
  }
}

/** The gRPC server credentials for a serving choice. */
export function serverCredentialsOf(security: ServingSecurity): ServerCredentials {
  if (security.kind === 'insecure') return ServerCredentials.createInsecure();
  return ServerCredentials.createSsl(
    null,
    [{ cert_chain: security.certChain, private_key: security.privateKey }],
    false,
  );
}

/** Credentials for dialing workers: TLS trusting `workerCa` when given, else plaintext. */
export function workerChannelCredentials(workerCa: Buffer | undefined): ChannelCredentials {
  return workerCa ? credentials.createSsl(workerCa) : credentials.createInsecure();
}
