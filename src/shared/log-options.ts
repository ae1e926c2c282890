/**
 * The pino options the router and the worker share, so their JSON lines read alike: level names,
 * ISO times, a `service` field, and credentials redacted. Plain data here; each service passes it
 * to pino itself, with pino's ISO time function (a pure module reads no clock).
 */

/** Keys redacted wherever they appear (one level deep), so a token can never reach a log line. */
const REDACTED: readonly string[] = [
  'authorization',
  'token',
  'authToken',
  'password',
  '*.authorization',
  '*.token',
  '*.authToken',
];

/** pino options, as much of them as the services set. */
export interface LogOptions {
  readonly level: string;
  readonly base: Readonly<Record<string, string>>;
  readonly timestamp: () => string;
  readonly redact: { readonly paths: string[]; readonly censor: string };
  readonly formatters: { readonly level: (label: string) => { level: string } };
}

/**
 * Options for `service`'s logger at `level`, stamping lines with `isoTime` (pass
 * `pino.stdTimeFunctions.isoTime`), with `fields` on every line.
 */
export function logOptions(
  service: string,
  level: string,
  isoTime: () => string,
  fields: Readonly<Record<string, string>> = {},
): LogOptions {
  return {
    level,
    base: { service, ...fields },
    timestamp: isoTime,
    redact: { paths: [...REDACTED], censor: '[redacted]' },
    formatters: { level: (label) => ({ level: label }) },
  };
}
