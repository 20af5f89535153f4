// Delegation while away (issue 35): a person names one delegate for a period; inside it, the
// delegate may vote on routed approvals as them (the vote is the delegator's, recorded with who cast
// it). One row per delegator (a new one replaces it); `scopes` are the delegator's key's scopes when
// they delegated — what a route's groups by scope judge the delegated vote by. The edge asks
// `delegationFor` only when a decision names `on_behalf_of`.
import { z } from "zod";
import { decodeWith, parseJson } from "../store/codec.ts";
import type { SqlStore } from "../store/sql-store.ts";

export const Delegation = z.object({
  from: z.string(),
  to: z.string(),
  starts_at_ms: z.number(),
  ends_at_ms: z.number(),
  scopes: z.array(z.string()),
  created_at_ms: z.number(),
});
export type Delegation = z.infer<typeof Delegation>;

const decode = (text: string) =>
  decodeWith(Delegation, parseJson(text, "delegation"), "delegation");

export function putDelegation(store: SqlStore, delegation: Delegation): void {
  store.run(
    "INSERT OR REPLACE INTO delegations (from_id, data) VALUES (?, ?)",
    delegation.from,
    JSON.stringify(delegation),
  );
}

/** true: there was one to end. */
export const endDelegation = (store: SqlStore, from: string): boolean =>
  store.run("DELETE FROM delegations WHERE from_id = ?", from) > 0;

export const listDelegations = (store: SqlStore): Delegation[] =>
  store
    .all<{ data: string }>("SELECT data FROM delegations ORDER BY from_id")
    .map((row) => decode(row.data));

/** `from`'s delegation to `to`, if it is in force at `nowMs` (else null: the vote is refused). */
export function delegationFor(
  store: SqlStore,
  from: string,
  to: string,
  nowMs: number,
): Delegation | null {
  const row = store.one<{ data: string }>("SELECT data FROM delegations WHERE from_id = ?", from);
  const delegation = row ? decode(row.data) : null;
  return delegation &&
    delegation.to === to &&
    delegation.starts_at_ms <= nowMs &&
    nowMs < delegation.ends_at_ms
    ? delegation
    : null;
}
