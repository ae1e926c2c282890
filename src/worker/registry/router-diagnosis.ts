/**
 * Why the worker could not reach the router, in the words the clients use for the same mismatch
 * (src/shared/transport-problem.ts): which side speaks what, and the worker setting to change.
 */
import { speaksTls } from '../../net/tls-probe.js';
import { describeTransportProblem, transportProblemOf } from '../../shared/transport-problem.js';

/** The sentence for a failed report's text, or null when it is not about the connection. */
export async function routerDiagnosis(
  router: string,
  dialsTls: boolean,
  details: string,
): Promise<string | null> {
  let problem = transportProblemOf(details);
  if (problem === null) return null;
  // A plaintext dial of a TLS port just closes, before or after the connection came up.
  if (
    (problem === 'connection-failed' || problem === 'connection-lost') &&
    !dialsTls &&
    (await speaksTls(router))
  ) {
    problem = 'plaintext-to-tls';
  }
  return describeTransportProblem(problem, {
    server: 'the router',
    address: router,
    addressSetting: '--router (WORKER_ROUTER)',
    dialer: 'this worker',
    dialerTls: dialsTls,
    insecureSetting: '--insecure (READIE_INSECURE), when the router runs with --insecure',
    tlsSetting: 'drop --insecure and pass --tls-cert/--tls-key (READIE_TLS_CERT, READIE_TLS_KEY)',
    caSetting: '--tls-ca (READIE_TLS_CA)',
    serverTlsSetting: "the router's --tls-cert/--tls-key",
  });
}
