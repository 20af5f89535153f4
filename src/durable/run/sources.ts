// The run's tool sources, stored once each by content hash (`tool_sources`), so a call row names
// its source by hash. Content-addressed, so a decoded source is never stale: the decoded cache and
// the source → hash map need no invalidation.
import type { TurnCall } from "../../domain/turn/turn.ts";
import { LruCache } from "../../lru.ts";
import { knownToolVersion, storedUnderVersion, toolVersion } from "../../tools/catalog.ts";
import type { ToolSource } from "../../tools/spec.ts";
import { decodeToolSource } from "../store/run-rows.ts";
import type { SqlStore } from "../store/sql-store.ts";

/** Decoded tool sources by hash (content-addressed, so never stale). */
const SOURCE_CACHE = { maxEntries: 64, maxBytes: 4 * 1024 * 1024 };

export class ToolSources {
  private readonly sources = new LruCache<string, ToolSource>(
    SOURCE_CACHE,
    (source) => JSON.stringify(source).length,
  );

  constructor(private readonly sql: SqlStore) {}

  /** Computes (once per source object, kept by the catalog) the version each source is stored under. */
  async hash(sources: readonly ToolSource[]): Promise<void> {
    for (const source of sources) await toolVersion(source);
  }

  readonly hashOf = (source: ToolSource): string | undefined => knownToolVersion(source);

  /**
   * Stores each source hashed by `hash` once per run, in the caller's transaction (a source
   * without a hash is kept in its call rows instead: encodeTurnCalls).
   */
  store(sources: readonly ToolSource[]): void {
    this.sql.ensureTable("tool_sources");
    const done = new Set<string>();
    for (const source of sources) {
      const hash = this.hashOf(source);
      if (hash === undefined || done.has(hash)) continue;
      done.add(hash);
      // Stored sources never change or go (until the run is pruned): known ones need no read.
      const known = this.sql.memo(
        "tool_sources",
        `tool_sources ${hash}`,
        () => this.sql.one("SELECT 1 AS x FROM tool_sources WHERE hash = ?", hash) !== null,
      );
      if (known) continue;
      this.sql.run(
        "INSERT INTO tool_sources (hash, source) VALUES (?, ?)",
        hash,
        JSON.stringify(source),
      );
    }
  }

  readonly sourceOf = (hash: string): ToolSource | null => {
    const cached = this.sources.get(hash);
    if (cached) return cached;
    const row = this.sql.exists("tool_sources")
      ? this.sql.one<{ source: string }>("SELECT source FROM tool_sources WHERE hash = ?", hash)
      : null;
    if (!row) return null;
    const source = decodeToolSource(row.source);
    this.sources.set(hash, source);
    storedUnderVersion(source, hash);
    return source;
  };

  clear(): void {
    this.sources.clear();
  }
}

/** The tool sources of a turn's submitted calls. */
export const dispatchedSources = (calls: readonly TurnCall[]): ToolSource[] =>
  calls.flatMap((stored) => ("submit" in stored ? [stored.submit.source] : []));
