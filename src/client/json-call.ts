/**
 * The `json-call` payload format: a Python function named by module or given as source, with JSON
 * arguments; the result is a JSON envelope `{"ok": true, "value": ...}` or
 * `{"ok": false, "error": {"type", "module", "message", "traceback"}}`.
 */
import type { CallInfo } from './call-info.js';
import { ProtocolError, RemoteExecutionError } from './errors.js';

/** A Python function in an importable module (`{ module: 'numpy.linalg', function: 'norm' }`). */
export interface ModuleFunction {
  readonly module: string;
  readonly function: string;
}

/** A Python function defined by source text (`{ source: 'def f(x):\n    return x', function: 'f' }`). */
export interface SourceFunction {
  readonly source: string;
  readonly function: string;
}

/** A Python function to call, with its JSON arguments. */
export type PythonCall = (ModuleFunction | SourceFunction) & {
  /** Positional arguments; each must survive `JSON.stringify`. */
  readonly args?: readonly unknown[];
  /** Keyword arguments. */
  readonly kwargs?: Readonly<Record<string, unknown>>;
};

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;
const DOTTED = /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$/;

/** The request payload of a call: UTF-8 JSON `{module, source, function, args, kwargs}`. Throws TypeError for a malformed call. */
export function encodeJsonCall(call: PythonCall): Buffer {
  const module = 'module' in call ? call.module : null;
  const source = 'source' in call ? call.source : null;
  if ((module === null) === (source === null)) {
    throw new TypeError('a call names exactly one of `module` and `source`');
  }
  if (module !== null && !DOTTED.test(module)) {
    throw new TypeError(`module ${JSON.stringify(module)} is not a dotted Python module name`);
  }
  if (!IDENTIFIER.test(call.function)) {
    throw new TypeError(`function ${JSON.stringify(call.function)} is not a Python identifier`);
  }
  const args = call.args ?? [];
  const kwargs = call.kwargs ?? {};
  if (!Array.isArray(args)) throw new TypeError('args must be an array');
  const text = JSON.stringify({ module, source, function: call.function, args, kwargs });
  return Buffer.from(text, 'utf8');
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function text(value: unknown): string {
  if (typeof value === 'string') return value;
  return value === undefined || value === null ? '' : JSON.stringify(value);
}

function preview(payload: string): string {
  return payload.length <= 200 ? payload : `${payload.slice(0, 200)}...`;
}

/** The value of a JSON result envelope; throws RemoteExecutionError for a remote exception, ProtocolError for anything unreadable. */
export function decodeJsonEnvelope(payload: Buffer, call?: CallInfo): unknown {
  const body = payload.toString('utf8');
  let envelope: unknown;
  try {
    envelope = JSON.parse(body);
  } catch (cause) {
    throw new ProtocolError(`the result is not JSON: ${preview(body)}`, { call, cause });
  }
  if (!isRecord(envelope) || typeof envelope.ok !== 'boolean') {
    throw new ProtocolError(`the result is not a readie envelope: ${preview(body)}`, { call });
  }
  if (envelope.ok) return envelope.value ?? null;
  const error = envelope.error;
  if (!isRecord(error)) {
    throw new ProtocolError(`a failed call's envelope has no error: ${preview(body)}`, { call });
  }
  throw new RemoteExecutionError(
    {
      type: text(error.type) || 'Exception',
      module: text(error.module),
      message: text(error.message),
      traceback: text(error.traceback),
    },
    call,
  );
}
