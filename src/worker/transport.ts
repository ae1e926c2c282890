/** gRPC credentials from the worker's transport settings (--insecure, or TLS files). */
import { readFile } from 'node:fs/promises';
import { credentials, ServerCredentials, type ChannelCredentials } from '@grpc/grpc-js';
import type { TransportSecurity } from './options.js';

/** Credentials for calls to the router. */
export async function routerCredentials(security: TransportSecurity): Promise<ChannelCredentials> {
  if (security.insecure) return credentials.createInsecure();
  const ca = security.caFile ? await readFile(security.caFile) : null;
  return credentials.createSsl(
    ca,
    await readFile(security.keyFile),
    await readFile(security.certFile),
  );
}

/** Credentials for serving ExecutionService and health. */
export async function serverCredentials(security: TransportSecurity): Promise<ServerCredentials> {
  if (security.insecure) return ServerCredentials.createInsecure();
  return ServerCredentials.createSsl(null, [
    {
      private_key: await readFile(security.keyFile),
      cert_chain: await readFile(security.certFile),
    },
  ]);
}
