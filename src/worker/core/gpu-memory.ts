/**
 * GPU memory in use, as the worker reports it in its load reports (the router's GPU headroom
 * filter reads it). Pure: the device reading is passed in.
 *
 * What it counts: the GPU memory budgets of the calls the worker's containers hold (a session's
 * idle container keeps its call's budget: its Python state may still hold device memory), or what
 * the devices say is in use when the worker can read it (`nvidia-smi`), whichever is more: the
 * budgets count memory a call is about to allocate, the devices count memory others use.
 */

/** The total of `nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits`, in bytes. */
export function parseGpuMemoryUsed(text: string): number | null {
  const lines = text
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '');
  if (lines.length === 0) return null;
  let mebibytes = 0;
  for (const line of lines) {
    if (!/^\d+(\.\d+)?$/.test(line)) return null;
    mebibytes += Number(line);
  }
  return Math.round(mebibytes * 1024 * 1024);
}

/** The GPU memory to report: the budgets held, or the devices' reading when that is more. */
export function gpuMemoryInUse(budgetsHeld: number, deviceReading: number | null): number {
  return Math.max(budgetsHeld, deviceReading ?? 0);
}
