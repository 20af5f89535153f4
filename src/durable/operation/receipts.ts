// The operation's signed receipts (issue 37, domain/receipt.ts). Durable without a row of its own in
// the terminal transaction: the `recorded` log row is itself the notice that a receipt is due, so a
// crash between that commit and the signature loses nothing — any read of the receipt, the
// compensation link and the alarm (before it prunes anything) produce what is missing, once, in
// chain order. Signing happens here, off the reply path, with the tenant's current key: fetched
// sealed from the TenantObject at most once per RECEIPT_KEY_CACHE_MS per isolate and tenant.
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
import { toolName, type OperationLog } from "./log.ts";

type Signer = { kid: string; key: CryptoKey; notAfterMs: number; fetchedAtMs: number };
/** Per isolate and tenant: the key fetched last (every operation object of the isolate shares it). */
const signers = new Map<string, Signer>();

export class Receipts {
  /** How many are stored (undefined: not read yet); only this object writes them. */
  private count: number | undefined = undefined;
  /** One production at a time: a second caller waits for the first, then finds nothing missing. */
  private work: Promise<Result<void, string>> = Promise.resolve(ok(undefined));

  constructor(
    private readonly log: OperationLog,
    private readonly env: Env,
  ) {}

  /** The stored chain, oldest first, if it is `tenantId`'s (another tenant's: none, as unknown). */
  chain(tenantId: string): SignedReceipt[] {
    const store = this.log.store;
    if (!store.exists("op_receipts")) return [];
    return store
      .all<{ receipt: string }>(
        "SELECT receipt FROM op_receipts WHERE tenant_id = ? ORDER BY seq",
        tenantId,
      )
      .map((row) => JSON.parse(row.receipt) as SignedReceipt);
  }

  /** A settled operation lacks a receipt it should have. */
  pending(): boolean {
    const head = this.log.head();
    if (head?.state.phase !== "recorded") return false;
    const due = receiptsDue({ compensatedBy: undoViewOf(this.log, head).compensated_by });
    return this.stored() < due.length;
  }

  /** Signs and stores every receipt due and missing (idempotent; queued behind one in progress). */
  produce(): Promise<Result<void, string>> {
    this.work = this.work.then(() => this.produceNow()).catch((error) => err(String(error)));
    return this.work;
  }

  private stored(): number {
    const store = this.log.store;
    this.count ??= store.exists("op_receipts")
      ? (store.one<{ n: number }>("SELECT COUNT(*) AS n FROM op_receipts")?.n ?? 0)
      : 0;
    return this.count;
  }

  private async produceNow(): Promise<Result<void, string>> {
    const head = this.log.head();
    if (head?.state.phase !== "recorded" || !this.pending()) return ok(undefined);
    const signer = await signerFor(this.env, head.frozen.tenant_id);
    if (!signer.ok) return signer;
    const facts = await receiptFacts(this.log, head);
    const due = receiptsDue(facts);
    let previous = this.chain(facts.tenantId).at(-1)?.hash ?? null;
    for (let seq = this.stored() + 1; seq <= due.length; seq++) {
      const issuedAtMs = Date.now();
      // Never a signature after the key's end, or with a key held past the cache bound.
      if (
        issuedAtMs > signer.value.notAfterMs ||
        issuedAtMs >= signer.value.fetchedAtMs + RECEIPT_KEY_CACHE_MS
      )
        return err("the signing key is no longer current; the next try fetches the new one");
      const payload = await receiptPayload(facts, due[seq - 1]!, seq, previous, {
        kid: signer.value.kid,
        issuedAtMs,
      });
      const bytes = new TextEncoder().encode(canonicalJson(payload));
      const signature = await crypto.subtle.sign({ name: "Ed25519" }, signer.value.key, bytes);
      const hash = await receiptHash(payload);
      const receipt: SignedReceipt = {
        payload,
        alg: "EdDSA",
        signature: base64url(new Uint8Array(signature as ArrayBuffer)),
        hash,
      };
      this.log.store.ensureTable("op_receipts");
      this.log.store.run(
        "INSERT INTO op_receipts (seq, tenant_id, receipt) VALUES (?, ?, ?)",
        seq,
        facts.tenantId,
        JSON.stringify(receipt),
      );
      this.count = seq;
      previous = hash;
    }
    return ok(undefined);
  }
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
    events: log.events(),
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
    const { kid, sealed, notAfterMs } = answer.value;
    const pkcs8 = await openSecret(master.value, tenantId, sealedKeyName(kid), sealed);
    const key = await crypto.subtle.importKey(
      "pkcs8",
      fromBase64url(pkcs8),
      { name: "Ed25519" },
      false,
      ["sign"],
    );
    const signer = { kid, key, notAfterMs, fetchedAtMs };
    if (signers.size > 1024) signers.clear();
    signers.set(tenantId, signer);
    return ok(signer);
  } catch (error) {
    return err(`the tenant's signing key could not be had: ${String(error)}`);
  }
}
