/** Facts about the machine and the sandbox's Python, probed at startup; CPU use between reports. */
import { execFile } from 'node:child_process';
import { access, constants } from 'node:fs/promises';
import { cpus } from 'node:os';
import { delimiter, join } from 'node:path';
import { promisify } from 'node:util';
import { parseGpuMemoryUsed } from './core/gpu-memory.js';

const run = promisify(execFile);

/** What the sandbox interpreter is, or why it cannot serve. */
export type PythonProbe =
  | { readonly ok: true; readonly version: string }
  | { readonly ok: false; readonly problem: string };

/** Checks that `python` runs and has cloudpickle; reads its version. */
export async function probePython(python: string): Promise<PythonProbe> {
  try {
    const { stdout } = await run(
      python,
      ['-s', '-E', '-c', 'import platform, cloudpickle; print(platform.python_version())'],
      { timeout: 30_000, env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin' } },
    );
    return { ok: true, version: stdout.trim() };
  } catch (error) {
    const failure = error as NodeJS.ErrnoException & { stderr?: string };
    if (failure.code === 'ENOENT') return { ok: false, problem: `no Python at ${python}` };
    if (failure.code === 'EACCES') return { ok: false, problem: `${python} is not executable` };
    const stderr = (failure.stderr ?? '').trim();
    if (stderr.includes("No module named 'cloudpickle'")) {
      return {
        ok: false,
        problem: `${python} has no cloudpickle (on Debian: apt-get install python3-cloudpickle)`,
      };
    }
    return {
      ok: false,
      problem: `${python} does not run: ${stderr.split('\n').at(-1) ?? failure.message}`,
    };
  }
}

/** Cores busy since the previous sample. */
export class CpuSampler {
  private previous = cpus();

  /** CPU cores on the machine. */
  get total(): number {
    return this.previous.length;
  }

  /** Cores in use, on average, since the last call. */
  sample(): number {
    const current = cpus();
    let busy = 0;
    let all = 0;
    current.forEach((cpu, index) => {
      const before = this.previous[index];
      if (!before) return;
      const sum = (times: typeof cpu.times) =>
        times.user + times.nice + times.sys + times.idle + times.irq;
      const elapsed = sum(cpu.times) - sum(before.times);
      all += elapsed;
      busy += elapsed - (cpu.times.idle - before.times.idle);
    });
    this.previous = current;
    return all > 0 ? Math.round((busy / all) * current.length * 1000) / 1000 : 0;
  }
}

/** Reads the GPU memory the devices say is in use, with `nvidia-smi`, when the machine has it. */
export class GpuMemoryReader {
  private constructor(private readonly nvidiaSmi: string | null) {}

  /** A reader using `nvidiaSmi` (a path), or the `nvidia-smi` found on `path`, or none. */
  static async find(path: string, nvidiaSmi?: string | null): Promise<GpuMemoryReader> {
    if (nvidiaSmi !== undefined) return new GpuMemoryReader(nvidiaSmi);
    for (const dir of path.split(delimiter).filter((entry) => entry !== '')) {
      const candidate = join(dir, 'nvidia-smi');
      try {
        await access(candidate, constants.X_OK);
        return new GpuMemoryReader(candidate);
      } catch {
        // not here
      }
    }
    return new GpuMemoryReader(null);
  }

  /** Bytes in use on all devices, or null when there is nothing to read (or it failed). */
  async read(): Promise<number | null> {
    if (this.nvidiaSmi === null) return null;
    try {
      const { stdout } = await run(
        this.nvidiaSmi,
        ['--query-gpu=memory.used', '--format=csv,noheader,nounits'],
        { timeout: 5_000 },
      );
      return parseGpuMemoryUsed(stdout);
    } catch {
      return null;
    }
  }
}
