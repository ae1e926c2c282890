/** A map's progress bar: one line on stderr, redrawn in place, when stderr is a terminal. */

/** How often the bar is redrawn at most, in ms. */
export const REDRAW_EVERY_MS = 100;
const WIDTH = 24;

/**
 * The bar's text: `label 37/1000 [###.....] 120.3/s 2 errors 0:03`, with ` 5 queued` while inputs
 * wait in the router's admission queue.
 */
export function renderProgress(
  label: string,
  done: number,
  total: number | undefined,
  errors: number,
  elapsedMs: number,
  queued = 0,
): string {
  const seconds = elapsedMs / 1000;
  const rate = seconds > 0 ? done / seconds : 0;
  const clock = `${Math.floor(seconds / 60)}:${String(Math.floor(seconds % 60)).padStart(2, '0')}`;
  let count = `${done}`;
  let bar = '';
  if (total !== undefined && total > 0) {
    const filled = Math.min(WIDTH, Math.floor((WIDTH * done) / total));
    bar = ` [${'#'.repeat(filled)}${'.'.repeat(WIDTH - filled)}]`;
    count = `${done}/${total}`;
  }
  const waiting = queued > 0 ? ` ${queued} queued` : '';
  return `${label} ${count}${bar} ${rate.toFixed(1)}/s ${errors} ${errors === 1 ? 'error' : 'errors'}${waiting} ${clock}`;
}

/** Draws a map's progress on stderr; a no-op when off. */
export class MapProgress {
  readonly enabled: boolean;
  done = 0;
  errors = 0;
  /** Inputs waiting in the router's admission queue now. */
  queued = 0;
  readonly #started = performance.now();
  #drawnAt = -Infinity;

  constructor(
    private readonly label: string,
    private readonly total: number | undefined,
    progress: boolean | undefined,
  ) {
    this.enabled = progress ?? process.stderr.isTTY;
  }

  /** One more input completed. */
  advance(failed: boolean): void {
    this.done += 1;
    if (failed) this.errors += 1;
    this.draw(false);
  }

  /** Redraws, at most every REDRAW_EVERY_MS unless `force`. */
  draw(force: boolean): void {
    if (!this.enabled) return;
    const now = performance.now();
    if (!force && now - this.#drawnAt < REDRAW_EVERY_MS) return;
    this.#drawnAt = now;
    const text = renderProgress(
      this.label,
      this.done,
      this.total,
      this.errors,
      now - this.#started,
      this.queued,
    );
    process.stderr.write(`\r\x1b[K${text}`);
  }

  /** Draws the last state and ends the line. */
  close(): void {
    if (!this.enabled) return;
    this.draw(true);
    process.stderr.write('\n');
  }
}
