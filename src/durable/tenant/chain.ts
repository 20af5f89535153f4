// The tenant's hash chain (`tenant_chain`, sealed like an operation's trace, domain/trace-chain.ts):
// what a tenant must be able to prove it did — each freeze and lift (freezes.ts), each standing
// grant made, confirmed and revoked and each call it approved (grants.ts). Append-only, one entry
// per change, written inside the change's own transaction; read back through the row codec, so a
// tampered entry is reported by the check rather than hidden.
import type { TraceEvent } from "../../domain/operation/index.ts";
import { seal } from "../../domain/trace-chain.ts";
import { decodeChainEntry } from "../store/freeze-rows.ts";
import type { SqlStore } from "../store/sql-store.ts";

/** Appends one entry linked to the last (inside the caller's transaction); its seq. */
export function appendChain(store: SqlStore, entry: TraceEvent): number {
  store.ensureTable("tenant_chain");
  const last = store.one<{ seq: number; event: string }>(
    "SELECT seq, event FROM tenant_chain ORDER BY seq DESC LIMIT 1",
  );
  const link = last ? { seq: last.seq, hash: sealedHash(decodeChainEntry(last.event)) } : null;
  const [sealed] = seal([entry], link);
  store.run(
    "INSERT INTO tenant_chain (seq, event) VALUES (?, ?)",
    sealed!.seq!,
    JSON.stringify(sealed),
  );
  return sealed!.seq!;
}

/** The last entry's seal, which the next links to: without one the chain cannot go on (corrupt). */
function sealedHash(entry: TraceEvent): string {
  if (typeof entry.hash !== "string")
    throw new Error("corrupt tenant_chain row: its last entry is unsealed");
  return entry.hash;
}

/** Every entry, in order. */
export const tenantChain = (store: SqlStore): TraceEvent[] =>
  store.exists("tenant_chain")
    ? store
        .all<{ event: string }>("SELECT event FROM tenant_chain ORDER BY seq")
        .map((row) => decodeChainEntry(row.event))
    : [];
