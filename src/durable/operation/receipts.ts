// The operation's signed receipts (issue 37, domain/receipt.ts). Durable without a row of its own in
// the terminal transaction: the `recorded` log row is itself the notice that a receipt is due, so a
// crash between that commit and the signature loses nothing — the alarm (RECEIPT_RECOVERY_MS after
// it was recorded, and before anything is pruned), any read of the receipt and the compensation
// link produce what is missing, once, in chain order. Signing happens here, off the reply path,
// with the tenant's current key: fetched sealed from the TenantObject at most once per
// RECEIPT_KEY_CACHE_MS per isolate and tenant.
import { fromBase64url, openSecret, base64url } from "../../crypto.ts";
import { secretsKey } from "../../config.ts";
import { canonicalJson } from "../../domain/canonical-json.ts";
import {
  RECEIPT_KEY_CACHE_MS,
  receiptHash,
  receiptPayload,
  receiptsDue,
  type ReceiptFacts,
  type SignedReceipt,
} from "../../domain/receipt.ts";
import { err, ok, type Result } from "../../domain/result.ts";
import { toolVersion } from "../../tools/catalog.ts";
import type { Env } from "../env.ts";
import { tenantStub } from "../stubs.ts";
import { sealedKeyName } from "../tenant/receipt-keys.ts";
import { undoViewOf } from "./compensation.ts";
import type { Head } from "./contracts.ts";
import { prunedFor, toolName, type OperationLog } from "./log.ts";
import { RECEIPTS_COLUMN } from "../store/operation-rows.ts";
import type { SqlStore } from "../store/sql-store.ts";

/**
 * A settled operation whose receipt is missing (the object died between the commit and the
 * signature) has its alarm this long after it was recorded, unless its pruning comes first.
 */
export const RECEIPT_RECOVERY_MS = 3_600_000;

type Signer = {
  kid: string;
  key: CryptoKey;
  notBeforeMs: number;
  notAfterMs: number;
  fetchedAtMs: number;
};
/** Per isolate and tenant: the key fetched last (every operation object of the isolate shares it). */
const signers = new Map<string, Signer>();

export class Receipts {
  /** The stored chain (undefined: not read yet); only this object writes it. */
  private known: SignedReceipt[] | undefined = undefined;
  /** One production at a time: a second caller waits for the first, then finds nothing missing. */
  private work: Promise<Result<void, string>> = Promise.resolve(ok(undefined));

  constructor(
    private readonly log: OperationLog,
    private readonly env: Env,
  ) {}

  /** The stored chain, oldest first, if it is `tenantId`'s (another tenant's: none, as unknown). */
  chain(tenantId: string): SignedReceipt[] {
    if (this.log.headFor(tenantId)) return this.stored();
    // Pruned: the tombstone keeps them (retention.ts).
    return prunedFor(this.log.store, tenantId) ? prunedReceipts(this.log.store) : [];
  }

  /** A settled operation lacks a receipt it should have. */
  pending(): boolean {
    const head = this.log.head();
    if (head?.state.phase !== "recorded") return false;
    const chain = this.stored().map((receipt) => receipt.payload);
    return receiptsDue(chain, undoViewOf(this.log, head).compensated_by).length > 0;
  }

  /** Signs and stores every receipt due and missing (idempotent; queued behind one in progress). */
  produce(): Promise<Result<void, string>> {
    this.work = this.work.then(() => this.produceNow()).catch((error) => err(String(error)));
    return this.work;
  }

  /** Row 1's chain: none for an operation this instance created (nothing read), else read once. */
  private stored(): SignedReceipt[] {
    if (this.known) return this.known;
    const store = this.log.store;
    if (this.log.createdHere() || !store.exists("op_log") || !store.hasColumn("op_log", "receipts"))
      return (this.known = []);
    const row = store.one<{ receipts: string | null }>("SELECT receipts FROM op_log WHERE seq = 1");
    return (this.known = row?.receipts ? (JSON.parse(row.receipts) as SignedReceipt[]) : []);
  }

  private async produceNow(): Promise<Result<void, string>> {
    const head = this.log.head();
    if (head?.state.phase !== "recorded" || !this.pending()) return ok(undefined);
    const signer = await signerFor(this.env, head.frozen.tenant_id);
    if (!signer.ok) return signer;
    const facts = await receiptFacts(this.log, head);
    const chain = [...this.stored()];
    const due = receiptsDue(
      chain.map((receipt) => receipt.payload),
      facts.compensatedBy,
    );
    for (const kind of due) {
      const seq = chain.length + 1;
      // Never before the key's start, though this machine's clock may trail the tenant's a little.
      const issuedAtMs = Math.max(Date.now(), signer.value.notBeforeMs);
      // Never a signature after the key's end, or with a key held past the cache bound.
      if (
        issuedAtMs > signer.value.notAfterMs ||
        issuedAtMs >= signer.value.fetchedAtMs + RECEIPT_KEY_CACHE_MS
      )
        return err("the signing key is no longer current; the next try fetches the new one");
      const previous = chain.at(-1)?.hash ?? null;
      const payload = await receiptPayload(facts, kind, seq, previous, {
        kid: signer.value.kid,
        issuedAtMs,
      });
      const bytes = new TextEncoder().encode(canonicalJson(payload));
      const signature = await crypto.subtle.sign({ name: "Ed25519" }, signer.value.key, bytes);
      const hash = await receiptHash(payload);
      chain.push({
        payload,
        alg: "EdDSA",
        signature: base64url(new Uint8Array(signature as ArrayBuffer)),
        hash,
      });
    }
    // One row written for all of them: row 1's column (added to a log from before issue 37).
    const store = this.log.store;
    store.ensureColumn("op_log", RECEIPTS_COLUMN);
    store.run("UPDATE op_log SET receipts = ? WHERE seq = 1", JSON.stringify(chain));
    this.known = chain;
    return ok(undefined);
  }
}

/** The chain a pruned operation's tombstone kept (none in tombstones from before issue 37). */
export function prunedReceipts(store: SqlStore): SignedReceipt[] {
  if (!store.exists("op_pruned") || !store.hasColumn("op_pruned", "receipts")) return [];
  const row = store.one<{ receipts: string | null }>("SELECT receipts FROM op_pruned WHERE k = 1");
  return row?.receipts ? (JSON.parse(row.receipts) as SignedReceipt[]) : [];
}

/** What the pure payload needs, read from the log as it stands (recorded). */
async function receiptFacts(log: OperationLog, head: Head): Promise<ReceiptFacts> {
  const { frozen, state } = head;
  if (state.phase !== "recorded") throw new Error("receipts are for recorded operations");
  return {
    operationId: frozen.id,
    tenantId: frozen.tenant_id,
    runId: frozen.run_id,
    tool: toolName(frozen),
    toolVersion: await toolVersion(frozen.source),
    inputHash: frozen.input_hash,
    idempotencyKey: frozen.plan.idempotencyKey,
    policyVersion: frozen.plan.cedar?.version ?? null,
    compensates: frozen.plan.compensates ?? null,
    compensatedBy: undoViewOf(log, head).compensated_by,
    events: log.eventsAsWritten(),
    recorded: {
      outcome: state.outcome,
      attempts: state.attempts,
      recordedAtMs: state.recordedAtMs,
      via: state.via,
      late: state.late,
    },
  };
}

/** The tenant's signing key of the moment: from this isolate's cache, or asked of the tenant and opened. */
async function signerFor(env: Env, tenantId: string): Promise<Result<Signer, string>> {
  const nowMs = Date.now();
  const held = signers.get(tenantId);
  if (held && nowMs < held.fetchedAtMs + RECEIPT_KEY_CACHE_MS && nowMs < held.notAfterMs)
    return ok(held);
  const master = secretsKey(env);
  if (!master.ok) return err(master.error.detail);
  try {
    const fetchedAtMs = Date.now();
    const answer = await tenantStub(env, tenantId).receiptSigner(tenantId);
    if (!answer.ok) return err(answer.error.detail);
    const { kid, sealed, notBeforeMs, notAfterMs } = answer.value;
    const pkcs8 = await openSecret(master.value, tenantId, sealedKeyName(kid), sealed);
    const key = await crypto.subtle.importKey(
      "pkcs8",
      fromBase64url(pkcs8),
      { name: "Ed25519" },
      false,
      ["sign"],
    );
    const signer = { kid, key, notBeforeMs, notAfterMs, fetchedAtMs };
    if (signers.size > 1024) signers.clear();
    signers.set(tenantId, signer);
    return ok(signer);
  } catch (error) {
    return err(`the tenant's signing key could not be had: ${String(error)}`);
  }
}
