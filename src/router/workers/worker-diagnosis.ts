/**
 * Why the router could not reach a worker, in the words the clients use for the same mismatch
 * (src/shared/transport-problem.ts): which side speaks what, and the router setting to change.
 */
import { speaksTls } from '../../net/tls-probe.js';
import { describeTransportProblem, transportProblemOf } from '../../shared/transport-problem.js';

/** The sentence for a failed dial's text, or null when it is not about the connection. */
export async function workerDiagnosis(
  workerId: string,
  address: string,
  dialsTls: boolean,
  details: string,
): Promise<string | null> {
  let problem = transportProblemOf(details);
  if (problem === null) return null;
  // A plaintext dial of a TLS port just closes, before or after the connection came up.
  if (
    (problem === 'connection-failed' || problem === 'connection-lost') &&
    !dialsTls &&
    (await speaksTls(address))
  ) {
    problem = 'plaintext-to-tls';
  }
  return describeTransportProblem(problem, {
    server: `worker ${workerId}`,
    address,
    addressSetting: "the worker's --advertise",
    dialer: 'the router',
    dialerTls: dialsTls,
    insecureSetting: 'no --worker-ca on the router, when every worker runs with --insecure',
    tlsSetting: "pass the router --worker-ca FILE (the CA that signed the workers' certificates)",
    caSetting: '--worker-ca',
    serverTlsSetting: "the worker's --tls-cert/--tls-key",
  });
}
