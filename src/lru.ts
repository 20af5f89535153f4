// A least-recently-used cache bounded by entry count and by total size (caller-measured bytes).
// Caches here hold derived or immutable data only (compiled tools, recorded outcomes), so an
// eviction costs a recomputation or one RPC, never correctness. A Map keeps insertion order:
// re-inserting on a hit moves the entry to the young end; eviction takes from the old end.
export type LruLimits = { maxEntries: number; maxBytes: number };

export class LruCache<K, V> {
  private readonly entries = new Map<K, { value: V; bytes: number }>();
  private totalBytes = 0;

  constructor(
    private readonly limits: LruLimits,
    private readonly sizeOf: (value: V) => number,
  ) {}

  get size(): number {
    return this.entries.size;
  }

  get bytes(): number {
    return this.totalBytes;
  }

  clear(): void {
    this.entries.clear();
    this.totalBytes = 0;
  }

  get(key: K): V | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    this.entries.delete(key);
    this.entries.set(key, entry);
    return entry.value;
  }

  /** An entry larger than the whole byte budget is not kept (it would evict everything else). */
  set(key: K, value: V): void {
    this.delete(key);
    const bytes = this.sizeOf(value);
    if (bytes > this.limits.maxBytes || this.limits.maxEntries <= 0) return;
    this.entries.set(key, { value, bytes });
    this.totalBytes += bytes;
    for (const [oldest, entry] of this.entries) {
      if (this.entries.size <= this.limits.maxEntries && this.totalBytes <= this.limits.maxBytes)
        break;
      this.entries.delete(oldest);
      this.totalBytes -= entry.bytes;
    }
  }

  delete(key: K): void {
    const entry = this.entries.get(key);
    if (!entry) return;
    this.entries.delete(key);
    this.totalBytes -= entry.bytes;
  }

  keys(): K[] {
    return [...this.entries.keys()];
  }
}
