/** A call's options, validated, and the config message that carries them first on the stream. */
import { PayloadFormat, type ImageSpec } from '../proto/gen/readie/v1/call.js';
import type { CallConfig } from '../proto/gen/readie/v1/proxy.js';
import { parseSize } from '../shared/units.js';
import type { PythonCall } from './json-call.js';
import { PYTHON_STDLIB } from './python-stdlib.js';

/** What a call asks of the cluster: the same options as the Python client's `@readie.remote`. */
export interface CallDemandOptions {
  /** The container's memory budget: bytes or `'2GiB'`, `'512MiB'`; unset means the router's DEFAULT_MEMORY. */
  readonly memory?: number | string;
  /** Run on a GPU worker. */
  readonly gpu?: boolean;
  /** GPU memory budget (bytes or a size string); a budget makes it a GPU call. */
  readonly gpuMemory?: number | string;
  /** Restore exactly this checkpoint. */
  readonly checkpointId?: string;
  /** Never restore a checkpoint: start the container cold. */
  readonly disableOptimizedExecution?: boolean;
  /** PEP 508 requirements installed into the container before the call. */
  readonly packages?: readonly string[];
  /** Import hints added to those derived from the module name or the source's imports. */
  readonly imports?: readonly string[];
  /**
   * The Python version the call needs (`'3.11'`); a major.minor mismatch with the sandbox is
   * refused. Default: empty, no requirement (JSON calls do not depend on the client's Python).
   */
  readonly pythonVersion?: string;
  /**
   * Run on the tenant's pinned version (docs/tenant-routing.md): the router resolves the version
   * the credential's tenant pinned and routes to the workers that hold it.
   */
  readonly pinned?: boolean;
  /**
   * The image the call runs in (docs/images.md): requirements installed once per worker and
   * tenant, modules imported, variables set; later calls on that worker start from it.
   */
  readonly image?: ImageOptions;
}

/** An image, as `Image(packages=..., imports=..., env=...)` declares it in Python. */
export interface ImageOptions {
  /** PEP 508 requirements, resolved to wheels only. */
  readonly packages?: readonly string[];
  /** Modules imported once installed (a failed import fails the build). */
  readonly imports?: readonly string[];
  /** Environment variables set in every container of the image. */
  readonly env?: Readonly<Record<string, string>>;
}

/** An image declaration as the wire carries it; TypeError for a value of the wrong type. */
export function imageOf(image: ImageOptions | undefined): ImageSpec | undefined {
  if (image === undefined) return undefined;
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(image.env ?? {})) {
    if (typeof value !== 'string') throw new TypeError(`image.env.${name} must be a string`);
    env[name] = value;
  }
  return {
    packages: strings(image.packages, 'image.packages'),
    imports: strings(image.imports, 'image.imports'),
    env,
  };
}

/** A size option in bytes (a number or `'2GiB'`); RangeError when it is not one. */
export function sizeOf(value: number | string | undefined, name: string): number | undefined {
  if (value === undefined) return undefined;
  const bytes = typeof value === 'number' ? value : parseSize(value);
  if (!Number.isSafeInteger(bytes) || bytes < 1) {
    throw new RangeError(
      `${name} must be a positive whole number of bytes or a size like '2GiB', not ${value}`,
    );
  }
  return bytes;
}

function strings(value: readonly string[] | undefined, name: string): string[] {
  if (value === undefined) return [];
  const items: unknown = value;
  if (!Array.isArray(items)) throw new TypeError(`${name} must be an array of strings`);
  return items.map((item: unknown) => {
    if (typeof item !== 'string' || item.trim() === '') {
      throw new TypeError(`${name} must hold non-empty strings, not ${JSON.stringify(item)}`);
    }
    return item;
  });
}

const topLevel = (module: string): string => module.split('.', 1)[0] ?? module;
const IMPORT = /^\s*import\s+([^#\n]+)/gm;
const FROM_IMPORT = /^\s*from\s+([A-Za-z_][\w.]*)\s+import\b/gm;

/** Top-level modules named by absolute `import` statements in Python source (a line-based scan). */
export function sourceImports(source: string): string[] {
  const found = new Set<string>();
  for (const match of source.matchAll(IMPORT)) {
    for (const part of (match[1] ?? '').replace(/[()\\]/g, '').split(',')) {
      const name = part.trim().split(/\s+/)[0] ?? '';
      if (/^[A-Za-z_][\w.]*$/.test(name)) found.add(topLevel(name));
    }
  }
  for (const match of source.matchAll(FROM_IMPORT)) found.add(topLevel(match[1] ?? ''));
  return [...found];
}

/**
 * The import hints of a call, sorted: the top-level package of its module, or those its source
 * imports, without the standard library; plus the explicit ones.
 */
export function importHints(call: PythonCall, explicit: readonly string[] = []): string[] {
  const derived = 'module' in call ? [topLevel(call.module)] : sourceImports(call.source);
  const hints = new Set(
    derived.filter((name) => !PYTHON_STDLIB.has(name) && !name.startsWith('_')),
  );
  for (const name of explicit) hints.add(topLevel(name));
  return [...hints].sort();
}

/** The first message's config of a `json-call`. Throws TypeError or RangeError for bad options. */
export function buildCallConfig(
  requestId: string,
  sessionId: string,
  call: PythonCall,
  options: CallDemandOptions = {},
): CallConfig {
  const checkpointId = options.checkpointId ?? '';
  if (typeof checkpointId !== 'string') throw new TypeError('checkpointId must be a string');
  if (options.pinned === true && options.image !== undefined) {
    throw new TypeError("pinned runs on the tenant's version: it cannot also name an image");
  }
  return {
    requestId,
    sessionId,
    imports: importHints(call, strings(options.imports, 'imports')),
    memory: sizeOf(options.memory, 'memory'),
    gpuMemory: sizeOf(options.gpuMemory, 'gpuMemory'),
    gpu: options.gpu ?? false,
    disableOptimizedExecution: options.disableOptimizedExecution ?? false,
    packages: strings(options.packages, 'packages'),
    checkpointId,
    pythonVersion: options.pythonVersion ?? '',
    format: PayloadFormat.PAYLOAD_FORMAT_JSON_CALL,
    pinned: options.pinned ?? false,
    retryOf: '',
    function: functionName(call),
    ...(options.image === undefined ? {} : { image: imageOf(options.image) }),
  };
}

/** The name the call history shows for `call`: `module.function`, or the function alone. */
function functionName(call: PythonCall): string {
  return 'module' in call ? `${call.module}.${call.function}` : call.function;
}
