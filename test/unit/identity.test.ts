// freezeCall: logical operation id = hash(tenant, scope, tool, operation key); the idempotency key
// is derived from the operation id alone, under the deployment's key material (an HMAC). Each row
// varies one input and states whether the operation id and the input hash must stay the same.
import { describe, expect, it } from "vitest";
import { canonicalJson, sha256Hex } from "../../src/domain/canonical-json.ts";
import {
  freezeCall,
  idempotencyKeyFor,
  type IdentityInput,
  type OperationId,
} from "../../src/domain/identity.ts";
import { idempotencyKeySecret } from "../../src/crypto.ts";

const SECRET = await idempotencyKeySecret("test-signing-key");
const keyOf = async (call: IdentityInput) =>
  idempotencyKeyFor((await freezeCall(call)).operationId, SECRET);

const write: IdentityInput = {
  tenantId: "t_1",
  runId: "run_1",
  tool: "refund",
  risk: "write",
  scope: "run",
  operationKey: [],
  input: { order_id: "ord_1", amount: 500, currency: "usd" },
  callId: "call_1",
};
const read: IdentityInput = {
  ...write,
  tool: "get_order",
  risk: "read",
  input: { order_id: "ord_1" },
};
const keyed: IdentityInput = { ...write, operationKey: ["order_id"] };

type Row = [
  name: string,
  a: IdentityInput,
  b: IdentityInput,
  sameOperation: boolean,
  sameHash: boolean,
];

const rows: Row[] = [
  [
    "write: same input, different key order",
    write,
    { ...write, input: { currency: "usd", amount: 500, order_id: "ord_1" } },
    true,
    true,
  ],
  [
    "write: new call id for the same write (re-proposal)",
    write,
    { ...write, callId: "call_2" },
    true,
    true,
  ],
  [
    "write: different amount with the default (whole-input) key",
    write,
    { ...write, input: { ...write.input, amount: 501 } },
    false,
    false,
  ],
  [
    "write: different recipient with the default key",
    write,
    { ...write, input: { ...write.input, order_id: "ord_2" } },
    false,
    false,
  ],
  [
    "business key: different amount, same order_id",
    keyed,
    { ...keyed, input: { ...keyed.input, amount: 9_999 } },
    true,
    false,
  ],
  [
    "business key: different order_id",
    keyed,
    { ...keyed, input: { ...keyed.input, order_id: "ord_2" } },
    false,
    false,
  ],
  ["business key vs whole-input key for the same input", keyed, write, false, true],
  [
    "irreversible_write behaves as write",
    { ...write, risk: "irreversible_write" },
    { ...write, risk: "irreversible_write", callId: "call_9" },
    true,
    true,
  ],
  ["read: different call ids", read, { ...read, callId: "call_2" }, false, true],
  ["read: same call id, same input", read, { ...read }, true, true],
  [
    "read: same call id, different input (a changed replay)",
    read,
    { ...read, input: { order_id: "ord_2" } },
    true,
    false,
  ],
  [
    "read: ignores operation_key",
    read,
    { ...read, callId: "call_2", operationKey: ["order_id"] },
    false,
    true,
  ],
  ["scope run: different run ids", write, { ...write, runId: "run_2" }, false, true],
  [
    "scope tenant: different run ids",
    { ...write, scope: "tenant" },
    { ...write, scope: "tenant", runId: "run_2" },
    true,
    true,
  ],
  ["scope tenant vs run for the same call", { ...write, scope: "tenant" }, write, false, true],
  [
    "read: scope tenant still keeps reads within the run",
    { ...read, scope: "tenant" },
    { ...read, scope: "tenant", runId: "run_2" },
    false,
    true,
  ],
  ["different tenants", write, { ...write, tenantId: "t_2" }, false, true],
  ["different tools", write, { ...write, tool: "refund_v2" }, false, true],
];

describe("freezeCall identity", () => {
  it.each(rows)("%s", async (_name, a, b, sameOperation, sameHash) => {
    const [fa, fb] = await Promise.all([freezeCall(a), freezeCall(b)]);
    expect(fa.operationId === fb.operationId).toBe(sameOperation);
    const [ka, kb] = await Promise.all([keyOf(a), keyOf(b)]);
    expect(ka === kb).toBe(sameOperation);
    expect(fa.inputHash === fb.inputHash).toBe(sameHash);
  });

  it("is deterministic across calls", async () => {
    expect(await freezeCall(write)).toEqual(
      await freezeCall({ ...write, input: { ...write.input } }),
    );
  });
});

describe("frozen input", () => {
  it("canonicalInput is the RFC 8785 form of the input and inputHash its SHA-256", async () => {
    const frozen = await freezeCall({
      ...write,
      input: { currency: "usd", amount: 500, order_id: "ord_1" },
    });
    expect(frozen.canonicalInput).toBe('{"amount":500,"currency":"usd","order_id":"ord_1"}');
    expect(frozen.inputHash).toBe(await sha256Hex(frozen.canonicalInput));
    expect(frozen.inputHash).toMatch(/^[0-9a-f]{64}$/);
  });

  it("the hash does not depend on the tool, run or call: only on the input", async () => {
    const a = await freezeCall(write);
    const b = await freezeCall({
      ...write,
      tenantId: "t_2",
      runId: "run_9",
      tool: "other",
      callId: "x",
    });
    expect(a.inputHash).toBe(b.inputHash);
  });
});

describe("operation id and idempotency key format", () => {
  it.each([
    ["write", write],
    ["read", read],
    ["business key", keyed],
  ])("%s: op_ + 32 lowercase hex, key tg_ + 32 other lowercase hex", async (_name, call) => {
    const frozen = await freezeCall(call);
    expect(frozen.operationId).toMatch(/^op_[0-9a-f]{32}$/);
    const key = await idempotencyKeyFor(frozen.operationId, SECRET);
    expect(key).toMatch(/^tg_[0-9a-f]{32}$/);
    expect(key).not.toBe(`tg_${frozen.operationId.slice(3)}`);
  });

  it("the key is HMAC-SHA256(secret, operation id): stable, per operation, and not derivable from the id alone", async () => {
    const id: OperationId = "op_0123456789abcdef0123456789abcdef";
    const key = await idempotencyKeyFor(id, SECRET);
    // Stable: every attempt and every re-proposal computes the same key.
    expect(await idempotencyKeyFor(id, SECRET)).toBe(key);
    expect(await idempotencyKeyFor("op_a", SECRET)).not.toBe(
      await idempotencyKeyFor("op_b", SECRET),
    );
    // What the model could compute from the operation id it reads is not the key.
    const unkeyed = await sha256Hex(id);
    expect(key).not.toBe(`tg_${id.slice(3)}`);
    expect(key.slice(3)).not.toBe(unkeyed.slice(0, 32));
    expect(key).not.toContain(id.slice(3, 11));
    // It is the HMAC under the deployment's key material, and nothing else.
    const mac = await crypto.subtle.sign(
      "HMAC",
      await crypto.subtle.importKey("raw", SECRET, { name: "HMAC", hash: "SHA-256" }, false, [
        "sign",
      ]),
      new TextEncoder().encode(id),
    );
    const hex = [...new Uint8Array(mac)].map((b) => b.toString(16).padStart(2, "0")).join("");
    expect(key).toBe(`tg_${hex.slice(0, 32)}`);
  });

  it("another deployment secret gives another key for the same operation", async () => {
    const id: OperationId = "op_0123456789abcdef0123456789abcdef";
    const other = await idempotencyKeySecret("another-deployment-signing-key");
    expect(other).not.toEqual(SECRET);
    expect(SECRET).toHaveLength(32);
    expect(await idempotencyKeyFor(id, other)).not.toBe(await idempotencyKeyFor(id, SECRET));
    // The key material is derived for this purpose: it is not the signing key's bytes.
    expect(new TextDecoder().decode(SECRET)).not.toContain("test-signing-key");
  });

  it("a write's key is identical across call ids (never derived from the call id)", async () => {
    const keys = await Promise.all(
      ["c1", "c2", "toolu_01", "call_abc"].map(async (callId) => keyOf({ ...write, callId })),
    );
    expect(new Set(keys).size).toBe(1);
  });

  it("does not leak the input into the operation id", async () => {
    const frozen = await freezeCall(write);
    expect(frozen.operationId).not.toContain(
      await sha256Hex(canonicalJson(write.input)).then((h) => h.slice(0, 32)),
    );
  });
});
