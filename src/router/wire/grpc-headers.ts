/**
 * gRPC's HTTP/2 headers and trailers, as the gRPC over HTTP/2 spec writes them: the request
 * headers of a call, `grpc-timeout`, and a status with `grpc-message` percent-encoded. Metadata
 * values under `-bin` keys travel base64-encoded.
 */
import { constants, type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http2';
import type { TrailerEntry } from '../../core/calls/answer-trailers.js';

const { HTTP2_HEADER_STATUS, HTTP2_HEADER_CONTENT_TYPE } = constants;

/** The headers that begin every gRPC answer. */
export const RESPONSE_HEADERS: OutgoingHttpHeaders = {
  [HTTP2_HEADER_STATUS]: 200,
  [HTTP2_HEADER_CONTENT_TYPE]: 'application/grpc+proto',
  'grpc-accept-encoding': 'identity',
};

const TIMEOUT_UNITS: Readonly<Record<string, number>> = {
  H: 3_600_000,
  M: 60_000,
  S: 1_000,
  m: 1,
  u: 0.001,
  n: 0.000_001,
};

/** The milliseconds a `grpc-timeout` header allows (Infinity without one; NaN when malformed). */
export function timeoutMsOf(header: string | string[] | undefined): number {
  if (header === undefined) return Infinity;
  const text = Array.isArray(header) ? header[0] : header;
  const match = /^(\d{1,8})([HMSmun])$/.exec(text ?? '');
  if (!match) return NaN;
  return Number(match[1]) * (TIMEOUT_UNITS[match[2]!] ?? NaN);
}

/** A `grpc-timeout` header value for `ms` milliseconds (at least 1 ms; 8 digits at most). */
export function timeoutHeader(ms: number): string {
  const whole = Math.max(1, Math.ceil(ms));
  if (whole < 100_000_000) return `${whole}m`;
  const seconds = Math.ceil(whole / 1_000);
  if (seconds < 100_000_000) return `${seconds}S`;
  return `${Math.min(99_999_999, Math.ceil(seconds / 3_600))}H`;
}

/** `details` as a `grpc-message` value: UTF-8, percent-encoding all but printable ASCII. */
export function encodeGrpcMessage(details: string): string {
  if (!/[^\x20-\x24\x26-\x7e]/.test(details)) return details;
  let encoded = '';
  for (const byte of Buffer.from(details, 'utf8')) {
    encoded +=
      byte >= 0x20 && byte <= 0x7e && byte !== 0x25
        ? String.fromCharCode(byte)
        : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return encoded;
}

/** A `grpc-message` value as text (percent-decoded; malformed escapes left as they are). */
export function decodeGrpcMessage(value: string | string[] | undefined): string {
  const text = (Array.isArray(value) ? value.join(',') : value) ?? '';
  if (!text.includes('%')) return text;
  const bytes: number[] = [];
  for (let index = 0; index < text.length; index += 1) {
    const hex = text.slice(index + 1, index + 3);
    if (text[index] === '%' && /^[0-9a-fA-F]{2}$/.test(hex)) {
      bytes.push(parseInt(hex, 16));
      index += 2;
    } else {
      bytes.push(...Buffer.from(text[index]!, 'utf8'));
    }
  }
  return Buffer.from(bytes).toString('utf8');
}

/** Metadata entries (`core/calls/answer-trailers.ts`) as HTTP/2 header values (`-bin` base64). */
export function metadataHeaders(
  entries: readonly TrailerEntry[],
  into: OutgoingHttpHeaders = {},
): OutgoingHttpHeaders {
  for (const { key, value } of entries) {
    into[key] =
      typeof value === 'string'
        ? key.endsWith('-bin')
          ? Buffer.from(value).toString('base64')
          : value
        : Buffer.from(value).toString('base64');
  }
  return into;
}

/** The trailers of a status: code, message, then `metadata`. */
export function statusTrailers(
  code: number,
  details: string,
  metadata: readonly TrailerEntry[] = [],
): OutgoingHttpHeaders {
  const trailers: OutgoingHttpHeaders = { 'grpc-status': String(code) };
  if (details !== '') trailers['grpc-message'] = encodeGrpcMessage(details);
  return metadataHeaders(metadata, trailers);
}

/** The first value of a header, as text. */
export function headerText(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}
