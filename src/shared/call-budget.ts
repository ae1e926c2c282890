/**
 * What a call asks of a worker, defined once for the router (placement's budget, the header it
 * sends) and the worker (reading that header): whether it is a GPU call, and its memory budget.
 */

/** A GPU call: it says so, or it has a GPU memory budget. */
export function isGpuCall(
  gpu: boolean | null | undefined,
  gpuMemory: number | null | undefined,
): boolean {
  return gpu === true || (gpuMemory ?? 0) > 0;
}

/** A call's memory budget in bytes: its own, or `DEFAULT_MEMORY` when it named none (null). */
export function memoryBudget(memory: number | null | undefined, defaultMemory: number): number {
  return memory ?? defaultMemory;
}
