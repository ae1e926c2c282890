/** Times and sizes as `readie status` shows them: at a glance, not to the byte. Pure. */

/** How long ago an ISO-8601 time was, in the largest whole unit (`3s`, `5m`, `2h`, `1d`). */
export function age(iso: string, now: number): string {
  if (iso === '') return '-';
  const ms = now - Date.parse(iso);
  if (!Number.isFinite(ms)) return '-';
  const seconds = Math.max(0, Math.round(ms / 1000));
  if (seconds < 120) return `${seconds}s`;
  if (seconds < 7_200) return `${Math.round(seconds / 60)}m`;
  if (seconds < 172_800) return `${Math.round(seconds / 3600)}h`;
  return `${Math.round(seconds / 86_400)}d`;
}

/** Bytes as a reader takes them in at a glance: `1.5GiB`, `512MiB`, `0B`. */
export function roughSize(bytes: number): string {
  for (const [unit, factor] of [
    ['TiB', 1024 ** 4],
    ['GiB', 1024 ** 3],
    ['MiB', 1024 ** 2],
    ['KiB', 1024],
  ] as const) {
    if (bytes >= factor) {
      const value = bytes / factor;
      return `${value >= 10 || Number.isInteger(value) ? Math.round(value) : value.toFixed(1)}${unit}`;
    }
  }
  return `${bytes}B`;
}
