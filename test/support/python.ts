/** Python helpers for tests: cloudpickle payloads and envelopes, wheels built offline. */
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The interpreter the tests (and the workers they start) use: `READIE_TEST_PYTHON`, by default
 * Debian's, which carries python3-cloudpickle, -grpcio and -protobuf (a pyenv first on PATH does not).
 */
export const PYTHON = process.env['READIE_TEST_PYTHON'] ?? '/usr/bin/python3';

/**
 * A cloudpickle payload (fn, args, kwargs) for the function `fn` that `source` defines in
 * `__main__`, so it pickles by value exactly as a client script's function does.
 */
export function pickleCall(source: string, fn: string, args: unknown[] = []): Buffer {
  const script = [
    'import sys, json, cloudpickle',
    'spec = json.loads(sys.stdin.read())',
    'exec(spec["source"], globals())',
    'sys.stdout.buffer.write(cloudpickle.dumps((globals()[spec["fn"]], tuple(spec["args"]), {})))',
  ].join('\n');
  return execFileSync(PYTHON, ['-c', script], { input: JSON.stringify({ source, fn, args }) });
}

/** A cloudpickle envelope, as JSON: the value's repr, or the error fields and the exception's type. */
export interface PickledEnvelope {
  ok: boolean;
  value?: string;
  error?: { type: string; module: string; message: string; traceback: string };
  exceptionType?: string;
}

/** Unpickles a cloudpickle result envelope (in Python) and describes it. */
export function unpickleEnvelope(bytes: Buffer): PickledEnvelope {
  const script = [
    'import sys, json, cloudpickle',
    'e = cloudpickle.loads(sys.stdin.buffer.read())',
    'out = {"ok": e["ok"]}',
    'if e["ok"]: out["value"] = repr(e["value"])',
    'else:',
    '    out["error"] = e["error"]',
    '    if "exception" in e: out["exceptionType"] = type(e["exception"]).__name__',
    'print(json.dumps(out))',
  ].join('\n');
  return JSON.parse(
    execFileSync(PYTHON, ['-c', script], { input: bytes }).toString(),
  ) as PickledEnvelope;
}

/** Builds a pure-Python wheel `name`-1.0 whose module `name` holds `source`, into `dir`. */
export function buildWheel(dir: string, name: string, source: string): string {
  const project = join(dir, `${name}-src`);
  mkdirSync(join(project, name), { recursive: true });
  writeFileSync(join(project, name, '__init__.py'), source);
  writeFileSync(
    join(project, 'pyproject.toml'),
    `[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n[project]\nname = "${name}"\nversion = "1.0"\n`,
  );
  const wheels = join(dir, 'wheels');
  execFileSync(
    PYTHON,
    [
      '-m',
      'pip',
      'wheel',
      '--no-deps',
      '--no-build-isolation',
      '--no-index',
      '-q',
      '-w',
      wheels,
      project,
    ],
    {
      env: {
        PATH: process.env['PATH'] ?? '/usr/bin:/bin',
        PIP_CONFIG_FILE: '/dev/null',
        HOME: dir,
      },
    },
  );
  return wheels;
}
