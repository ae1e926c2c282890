/**
 * A map that keeps at most `limit` entries: setting a key moves it to the newest end, and past the
 * limit the oldest set is forgotten. For what a caller remembers from input it does not control
 * (entries, workers, functions), so a stream of new keys cannot grow memory without end.
 */
export class BoundedMap<K, V> {
  readonly #entries = new Map<K, V>();

  constructor(readonly limit: number) {}

  get(key: K): V | undefined {
    return this.#entries.get(key);
  }

  set(key: K, value: V): void {
    this.#entries.delete(key);
    this.#entries.set(key, value);
    if (this.#entries.size > this.limit) {
      for (const oldest of this.#entries.keys()) {
        this.#entries.delete(oldest);
        break;
      }
    }
  }

  get size(): number {
    return this.#entries.size;
  }
}
