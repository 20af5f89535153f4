// Passkeys (issue 35): the WebAuthn credentials people registered in the console for step-up
// approvals, one row per credential, owned by the person it was registered as (the decider id:
// Access email or key name) — an assertion counts only for its owner. The signature counter only
// moves forward (compare-and-set), so one assertion cannot be spent twice where the authenticator
// counts. Verification itself happens at the edge (http/passkey.ts); this stores and answers.
import { err, ok, type Result } from "../../domain/result.ts";
import type { SqlStore } from "../store/sql-store.ts";
import type { TenantError } from "./contracts.ts";

export type StoredPasskey = {
  credential_id: string;
  person: string;
  /** The COSE public key, base64url. */
  public_key: string;
  counter: number;
  created_at_ms: number;
};

export function addPasskey(store: SqlStore, passkey: StoredPasskey): Result<true, TenantError> {
  const existing = passkeyOf(store, passkey.credential_id);
  if (existing)
    return existing.person === passkey.person
      ? ok(true)
      : err({ code: "invalid_request", detail: "this passkey is registered to someone else" });
  store.run(
    "INSERT INTO passkeys (credential_id, person, public_key, counter, created_at_ms) VALUES (?, ?, ?, ?, ?)",
    passkey.credential_id,
    passkey.person,
    passkey.public_key,
    passkey.counter,
    passkey.created_at_ms,
  );
  return ok(true);
}

export const passkeyOf = (store: SqlStore, credentialId: string): StoredPasskey | null =>
  store.one<StoredPasskey>(
    "SELECT credential_id, person, public_key, counter, created_at_ms FROM passkeys WHERE credential_id = ?",
    credentialId,
  ) ?? null;

export const passkeysOf = (store: SqlStore, person: string): StoredPasskey[] =>
  store.all<StoredPasskey>(
    "SELECT credential_id, person, public_key, counter, created_at_ms FROM passkeys WHERE person = ? ORDER BY created_at_ms",
    person,
  );

/**
 * The counter an assertion reported, stored if it still moves forward from `seen` (what the edge
 * verified against). false: another assertion got there first, so this one is a replay.
 */
export function advancePasskey(
  store: SqlStore,
  credentialId: string,
  seen: number,
  counter: number,
): boolean {
  // An authenticator that keeps no counter reports 0 every time: nothing to advance, nothing to race.
  if (counter === 0 && seen === 0) return true;
  const written = store.run(
    "UPDATE passkeys SET counter = ? WHERE credential_id = ? AND counter = ? AND ? > counter",
    counter,
    credentialId,
    seen,
    counter,
  );
  return written > 0;
}
