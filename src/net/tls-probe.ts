/**
 * Whether an address speaks TLS: a diagnosis run only after a plaintext dial failed in a way whose
 * text does not say why (a plaintext HTTP/2 preface sent to a TLS port just sees the connection
 * close). Shared by the clients, the router (dialing workers) and the workers (dialing the router).
 */
import { connect } from 'node:tls';

/** Splits `host:port` (IPv6 in brackets); null when it does not parse. */
function hostAndPort(address: string): { host: string; port: number } | null {
  const match = /^\[?([^\]]*?)\]?:(\d+)$/.exec(address.trim());
  if (!match?.[1] || !match[2]) return null;
  return { host: match[1], port: Number(match[2]) };
}

/** True when a TLS handshake with `address` completes within `timeoutMs` (its certificate unchecked). */
export function speaksTls(address: string, timeoutMs = 2_000): Promise<boolean> {
  const target = hostAndPort(address);
  if (target === null) return Promise.resolve(false);
  return new Promise((resolve) => {
    const isIp = /^[\d.]+$|:/.test(target.host);
    const socket = connect({
      host: target.host,
      port: target.port,
      rejectUnauthorized: false,
      ALPNProtocols: ['h2'],
      ...(isIp ? {} : { servername: target.host }),
    });
    const done = (result: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(result);
    };
    const timer = setTimeout(() => done(false), timeoutMs);
    socket.once('secureConnect', () => done(true));
    socket.once('error', () => done(false));
    socket.once('close', () => done(false));
  });
}
