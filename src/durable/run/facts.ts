// The run's tenant facts (domain/tenant-facts.ts): the one snapshot its operations get their sealed
// secrets and verdicts from, so no call waits on the TenantObject. Written with the run when it is
// created or patched (the tenant answered it with the tool sources), kept in memory, refreshed in
// the background — never awaited on a call — once older than FACTS_REFRESH_AFTER_MS, and never
// handed out past FACTS_MAX_AGE_MS or after `invalidate` (an upstream refused the credentials):
// then the operation asks the tenant itself, as it did before, until a refresh lands.
import {
  callFacts,
  freshness,
  type CallFacts,
  type TenantFacts,
} from "../../domain/tenant-facts.ts";
import type { RunState } from "../../domain/turn/turn.ts";
import type { Env } from "../env.ts";
import type { SqlStore } from "../store/sql-store.ts";
import { tenantStub } from "../stubs.ts";

/** `toolsHash`: the run's tools the facts were read for (a patch replaces both at once). */
type Held = { toolsHash: string; facts: TenantFacts };

export class RunFacts {
  /** undefined: not read from storage yet; null: none stored (a run from before issue 19). */
  private held: Held | null | undefined = undefined;
  /** Set by a 401/403: nothing is handed out until a refresh started after it lands. */
  private invalid = false;
  private generation = 0;
  private refreshing: Promise<void> | null = null;

  constructor(
    private readonly env: Env,
    private readonly store: SqlStore,
    private readonly waitUntil: (work: Promise<unknown>) => void,
  ) {}

  /** Stores the snapshot read with the run's tools (create, patch), in the caller's transaction. */
  write(toolsHash: string, facts: TenantFacts): void {
    this.store.ensureTable("tenant_facts");
    this.store.run(
      "INSERT OR REPLACE INTO tenant_facts (k, tools_hash, data) VALUES (1, ?, ?)",
      toolsHash,
      JSON.stringify(facts),
    );
    this.held = { toolsHash, facts };
  }

  /** The snapshot for these tools if it may be used now (else null: ask the tenant); may start a refresh. */
  usable(run: RunState, nowMs: number): TenantFacts | null {
    const held = this.load();
    const facts = !this.invalid && held?.toolsHash === run.toolsHash ? held.facts : null;
    const state = facts ? freshness(facts, nowMs) : "stale";
    if (state !== "fresh") this.refresh(run);
    return state === "stale" ? null : facts;
  }

  /** What the call to `tool` may use now, or null (its operation asks the tenant itself). */
  forCall(run: RunState, tool: string, nowMs: number): CallFacts | null {
    const facts = this.usable(run, nowMs);
    return facts && callFacts(facts, tool);
  }

  /** An upstream refused the credentials a call used: stop handing the snapshot out, re-read it once. */
  invalidate(run: RunState): void {
    this.invalid = true;
    this.generation++;
    this.refresh(run);
  }

  clear(): void {
    this.held = undefined;
    this.invalid = false;
  }

  /** One refresh at a time, in the background (waitUntil); a failure keeps the old snapshot, which ages out. */
  private refresh(run: RunState): void {
    if (this.refreshing) return;
    const generation = this.generation;
    const held = this.load();
    const known = held?.toolsHash === run.toolsHash ? held.facts.version : null;
    const work = (async () => {
      try {
        const answer = await tenantStub(this.env, run.tenantId).facts(
          run.tenantId,
          run.tools,
          known,
        );
        const now = this.load();
        // Patched meanwhile: the patch's own snapshot is newer than this one.
        if (now && now.toolsHash !== run.toolsHash) return;
        if (!("unchanged" in answer)) this.write(run.toolsHash, answer);
        else if (now && now.facts.version === known)
          this.write(run.toolsHash, { ...now.facts, readAtMs: answer.readAtMs });
        if (generation === this.generation) this.invalid = false;
      } catch (error) {
        console.error(
          JSON.stringify({
            level: "warn",
            event: "toolgate.tenant_facts_unavailable",
            run_id: run.runId,
            detail: String(error),
          }),
        );
      } finally {
        this.refreshing = null;
      }
      // Invalidated while this read was under way: it may predate the rotation, read again once.
      if (generation !== this.generation && this.invalid) this.refresh(run);
    })();
    this.refreshing = work;
    this.waitUntil(work);
  }

  private load(): Held | null {
    if (this.held === undefined) {
      const row = this.store.exists("tenant_facts")
        ? this.store.one<{ tools_hash: string; data: string }>(
            "SELECT tools_hash, data FROM tenant_facts WHERE k = 1",
          )
        : null;
      // Written by this object only (write above): no schema parse; `freshness` checks the shape's version.
      this.held = row ? { toolsHash: row.tools_hash, facts: JSON.parse(row.data) } : null;
    }
    return this.held;
  }
}
