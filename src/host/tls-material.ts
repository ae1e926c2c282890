/**
 * Checks of PEM TLS material before a process serves or dials with it, so that a key of another
 * certificate, or a file that holds no certificate, stops the start with one line naming the
 * files and the fix (instead of an OpenSSL error at the first handshake).
 */
import { createPrivateKey, X509Certificate } from 'node:crypto';

/** The files (and the flags that named them) of a certificate and its key. */
export interface TlsPairFiles {
  readonly certFile: string;
  readonly keyFile: string;
  readonly certFlag: string;
  readonly keyFlag: string;
}

/** The first certificate of a PEM bundle, or null when it holds none that parses. */
function firstCertificate(pem: Buffer): X509Certificate | null {
  const match = /-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/.exec(pem.toString());
  if (!match) return null;
  try {
    return new X509Certificate(match[0]);
  } catch {
    return null;
  }
}

/** What is wrong with a certificate chain and its private key, or null when they match. */
export function tlsPairProblem(cert: Buffer, key: Buffer, files: TlsPairFiles): string | null {
  const certificate = firstCertificate(cert);
  if (certificate === null) {
    return `${files.certFlag} ${files.certFile} holds no PEM certificate ("-----BEGIN CERTIFICATE-----"): pass the certificate chain file`;
  }
  let privateKey;
  try {
    privateKey = createPrivateKey(key);
  } catch {
    return `${files.keyFlag} ${files.keyFile} holds no PEM private key: pass the key file made with ${files.certFile}`;
  }
  if (!certificate.checkPrivateKey(privateKey)) {
    return (
      `${files.keyFlag} ${files.keyFile} is not the key of ${files.certFlag} ${files.certFile} ` +
      '(the key of another certificate?): pass the key made with that certificate'
    );
  }
  return null;
}

/** What is wrong with a CA bundle, or null when it holds at least one certificate. */
export function caBundleProblem(pem: Buffer, file: string, flag: string): string | null {
  return firstCertificate(pem) === null
    ? `${flag} ${file} holds no PEM certificate: pass the CA certificate (ca.pem) that signed the peer's certificate`
    : null;
}
