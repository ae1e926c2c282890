/**
 * gRPC credentials from the worker's transport settings (--insecure, or TLS files). The files are
 * checked first: a key of another certificate, or a CA file without a certificate, stops the start
 * with a line naming the files and the fix.
 */
import { readFile } from 'node:fs/promises';
import { credentials, ServerCredentials, type ChannelCredentials } from '@grpc/grpc-js';
import { caBundleProblem, tlsPairProblem } from '../host/tls-material.js';
import { WorkerStartupError } from './core/errors.js';
import type { TransportSecurity } from './options.js';

type TlsSecurity = Extract<TransportSecurity, { insecure: false }>;

async function readTls(path: string, flag: string): Promise<Buffer> {
  try {
    return await readFile(path);
  } catch (error) {
    throw new WorkerStartupError(`${flag} ${path}: cannot read it (${(error as Error).message})`);
  }
}

/** The worker's certificate chain and key, checked to belong together. */
async function keyPair(security: TlsSecurity): Promise<{ cert: Buffer; key: Buffer }> {
  const cert = await readTls(security.certFile, '--tls-cert');
  const key = await readTls(security.keyFile, '--tls-key');
  const problem = tlsPairProblem(cert, key, {
    certFile: security.certFile,
    keyFile: security.keyFile,
    certFlag: '--tls-cert',
    keyFlag: '--tls-key',
  });
  if (problem !== null) throw new WorkerStartupError(problem);
  return { cert, key };
}

/**
 * Checks the TLS files before anything else starts (a worker builds its checkpoints before it
 * serves): a key of another certificate or a CA file without a certificate is a WorkerStartupError.
 */
export async function checkTransportFiles(security: TransportSecurity): Promise<void> {
  if (security.insecure) return;
  await routerCredentials(security);
}

/** Credentials for calls to the router. */
export async function routerCredentials(security: TransportSecurity): Promise<ChannelCredentials> {
  if (security.insecure) return credentials.createInsecure();
  let ca: Buffer | null = null;
  if (security.caFile) {
    ca = await readTls(security.caFile, '--tls-ca');
    const problem = caBundleProblem(ca, security.caFile, '--tls-ca');
    if (problem !== null) throw new WorkerStartupError(problem);
  }
  const { cert, key } = await keyPair(security);
  return credentials.createSsl(ca, key, cert);
}

/** Credentials for serving ExecutionService and health. */
export async function serverCredentials(security: TransportSecurity): Promise<ServerCredentials> {
  if (security.insecure) return ServerCredentials.createInsecure();
  const { cert, key } = await keyPair(security);
  return ServerCredentials.createSsl(null, [{ private_key: key, cert_chain: cert }]);
}
