// The offline receipt verifier (scripts/lib/receipts.mjs, npm run verify-receipts), with keys made
// here: it accepts a whole bundle and refuses one with any field of any payload changed, a changed
// signature or hash, a skipped chain link, an unknown key, and a key used after its window ended.
// Its canonical JSON agrees with toolgate's own (src/domain/canonical-json.ts), which signs.
import { execFile } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { exportJWK, calculateJwkThumbprint } from "jose";
import { beforeAll, describe, expect, it } from "vitest";
import { canonicalize, verifyReceipts } from "../../scripts/lib/receipts.mjs";
import { canonicalJson } from "../../src/domain/canonical-json.ts";
import {
  receiptHash,
  receiptPayload,
  type ReceiptFacts,
  type ReceiptKind,
  type SignedReceipt,
} from "../../src/domain/receipt.ts";

const ROOT = join(import.meta.dirname, "..", "..");
const T0 = Date.UTC(2026, 0, 1);
const DAY = 86_400_000;

type Key = { kid: string; privateKey: CryptoKey; jwk: Record<string, unknown> };

async function makeKey(notBeforeMs: number, notAfterMs: number): Promise<Key> {
  const pair = (await crypto.subtle.generateKey({ name: "Ed25519" }, true, [
    "sign",
    "verify",
  ])) as CryptoKeyPair;
  const { kty, crv, x } = await exportJWK(pair.publicKey);
  const kid = await calculateJwkThumbprint({ kty, crv, x });
  return {
    kid,
    privateKey: pair.privateKey,
    jwk: {
      kty,
      crv,
      x,
      kid,
      alg: "EdDSA",
      use: "sig",
      not_before: new Date(notBeforeMs).toISOString(),
      not_after: new Date(notAfterMs).toISOString(),
    },
  };
}

const facts = (operationId: string, compensatedBy: string | null): ReceiptFacts => ({
  operationId,
  tenantId: "ten_01TESTTENANT0000000000000000",
  runId: "run_01TESTRUN000000000000000000",
  tool: "charge_card",
  toolVersion: "a".repeat(64),
  inputHash: "b".repeat(64),
  idempotencyKey: "idem_1",
  policyVersion: null,
  compensates: null,
  compensatedBy,
  events: [
    { type: "attempt_started", at_ms: T0 + 10, attempt: 1, idempotency_key: "idem_1", hash: "h1" },
    {
      type: "approval_decided",
      at_ms: T0 + 5,
      verdict: "approve",
      by: "alice@example.com",
      via: "access",
      reason: null,
      hash: "h0",
    },
    { type: "recorded", at_ms: T0 + 20, status: "succeeded", via: "attempt", hash: "h2" },
  ],
  recorded: {
    outcome: { status: "succeeded", result: { id: "ch_1", amount: 1.5, note: "é\u2028" } },
    attempts: 1,
    recordedAtMs: T0 + 20,
    via: "attempt",
    late: false,
  },
});

/** A chain of `kinds` for one operation, signed by `key` at `atMs`, as toolgate builds it. */
async function chainOf(operationId: string, kinds: ReceiptKind[], key: Key, atMs = T0 + DAY) {
  const chain: SignedReceipt[] = [];
  const f = facts(operationId, kinds.includes("compensation_linked") ? "op_undo" : null);
  for (const [i, kind] of kinds.entries()) {
    const previous = chain.at(-1)?.hash ?? null;
    const payload = await receiptPayload(f, kind, i + 1, previous, {
      kid: key.kid,
      issuedAtMs: atMs,
    });
    const signature = await crypto.subtle.sign(
      { name: "Ed25519" },
      key.privateKey,
      new TextEncoder().encode(canonicalJson(payload)),
    );
    chain.push({
      payload,
      alg: "EdDSA",
      signature: Buffer.from(signature).toString("base64url"),
      hash: await receiptHash(payload),
    });
  }
  return chain;
}

let key: Key;
let bundle: { type: string; tenant: string; receipts: SignedReceipt[] };
let jwks: { keys: Array<Record<string, unknown>> };

beforeAll(async () => {
  key = await makeKey(T0, T0 + 365 * DAY);
  bundle = {
    type: "toolgate.receipt-bundle/v1",
    tenant: "ten_01TESTTENANT0000000000000000",
    receipts: [
      ...(await chainOf("op_a", ["settled", "compensation_linked"], key)),
      ...(await chainOf("op_b", ["settled"], key)),
    ],
  };
  jwks = { keys: [key.jwk] };
});

/** Every leaf of `value` as a path and its value (arrays by index). */
function leaves(
  value: unknown,
  path: Array<string | number> = [],
): Array<[Array<string | number>, unknown]> {
  if (value !== null && typeof value === "object")
    return Object.entries(value).flatMap(([k, v]) =>
      leaves(v, [...path, Array.isArray(value) ? Number(k) : k]),
    );
  return [[path, value]];
}

function changed(leaf: unknown): unknown {
  if (typeof leaf === "string")
    return leaf.length > 0 ? `${leaf.slice(0, -1)}${leaf.at(-1) === "0" ? "1" : "0"}` : "x";
  if (typeof leaf === "number") return leaf + 1;
  if (typeof leaf === "boolean") return !leaf;
  return "x"; // null
}

describe("verifyReceipts", () => {
  it("accepts a bundle of whole chains signed within the key's window", async () => {
    expect(await verifyReceipts(bundle, jwks)).toEqual([]);
  });

  it("refuses the bundle with any one field of any payload changed (each leaf flipped in turn)", async () => {
    let flipped = 0;
    for (const [index, receipt] of bundle.receipts.entries()) {
      for (const [path] of leaves(receipt.payload)) {
        const copy = structuredClone(bundle);
        let at: any = copy.receipts[index]!.payload;
        for (const step of path.slice(0, -1)) at = at[step];
        const last = path.at(-1)!;
        at[last] = changed(at[last]);
        const problems = await verifyReceipts(copy, jwks);
        expect(problems.length, `${index} ${path.join(".")}`).toBeGreaterThan(0);
        expect(problems.map((p) => p.index)).toContain(index);
        flipped++;
      }
    }
    expect(flipped).toBeGreaterThan(60);
  });

  it("refuses a changed signature byte, a changed hash, a removed field and an added one", async () => {
    const variants: Array<(r: any) => void> = [
      (r) => {
        const bytes = Buffer.from(r.signature, "base64url");
        bytes[10] ^= 1;
        r.signature = bytes.toString("base64url");
      },
      (r) => (r.hash = `${r.hash.slice(0, -1)}${r.hash.endsWith("0") ? "1" : "0"}`),
      (r) => delete r.payload.previous_receipt_hash,
      (r) => (r.payload.extra = true),
    ];
    for (const variant of variants) {
      const copy = structuredClone(bundle);
      variant(copy.receipts[0]);
      expect((await verifyReceipts(copy, jwks)).length).toBeGreaterThan(0);
    }
  });

  it("refuses a chain that skips a link, or a receipt without the one before it", async () => {
    const three = await chainOf(
      "op_c",
      ["settled", "compensation_linked", "compensation_linked"],
      key,
    );
    expect(await verifyReceipts(three, jwks)).toEqual([]);
    const skipped = await verifyReceipts([three[0], three[2]], jwks);
    expect(skipped).toEqual([
      expect.objectContaining({
        operation_id: "op_c",
        reason: expect.stringMatching(/skips a link/),
      }),
    ]);
    expect((await verifyReceipts([three[1]], jwks))[0]!.reason).toMatch(/skips a link/);
  });

  it("refuses a receipt signed by a key the JWKS does not hold, or by another key under its kid", async () => {
    const stranger = await makeKey(T0, T0 + 365 * DAY);
    const theirs = await chainOf("op_d", ["settled"], stranger);
    expect((await verifyReceipts(theirs, jwks))[0]!.reason).toMatch(/does not hold/);
    // The stranger's signature presented under our kid: the payload names it, so it is changed.
    const forged = structuredClone(theirs);
    forged[0]!.payload.kid = key.kid;
    expect((await verifyReceipts(forged, jwks))[0]!.reason).toMatch(/does not verify/);
  });

  it("a rotated-out key: receipts from its window verify, one claiming it after its end is refused", async () => {
    const rotatedAt = T0 + 10 * DAY;
    const old = await makeKey(T0, rotatedAt + 30_000);
    const fresh = await makeKey(rotatedAt, rotatedAt + 365 * DAY);
    const keys = { keys: [old.jwk, fresh.jwk] };
    const before = await chainOf("op_e", ["settled"], old, rotatedAt - DAY);
    const after = await chainOf("op_f", ["settled"], fresh, rotatedAt + DAY);
    expect(await verifyReceipts([...before, ...after], keys)).toEqual([]);
    const late = await chainOf("op_g", ["settled"], old, rotatedAt + DAY);
    expect(await verifyReceipts(late, keys)).toEqual([
      expect.objectContaining({ reason: expect.stringMatching(/outside key .* window/) }),
    ]);
    const early = await chainOf("op_h", ["settled"], fresh, rotatedAt - DAY);
    expect((await verifyReceipts(early, keys))[0]!.reason).toMatch(/outside key/);
  });

  it("refuses a receipt of another tenant inside a tenant's bundle", async () => {
    const copy = structuredClone(bundle);
    copy.tenant = "ten_01OTHERTENANT000000000000000";
    expect((await verifyReceipts(copy, jwks)).length).toBe(copy.receipts.length);
  });
});

describe("canonical JSON", () => {
  it("the verifier's RFC 8785 form is toolgate's, byte for byte", () => {
    const vectors: unknown[] = [
      { b: 1, a: [true, null, "x"], "": 0 },
      { "\u20ac": 1, "\r": 2, "1": 3, "\ud83d\ude00": 4, "\u0080": 5, A: 6 },
      [1e21, 1e-7, -0, 0.1 + 0.2, 5e-324, 1.7976931348623157e308, 100, -1.5],
      { nested: { z: { y: [{}, []] }, a: '\u2028\u2029\u0007"\\/' } },
    ];
    for (const value of vectors) expect(canonicalize(value)).toBe(canonicalJson(value));
    expect(canonicalize({ b: -0, a: 1e21 })).toBe('{"a":1e+21,"b":0}');
  });
});

describe("npm run verify-receipts", () => {
  async function cli(args: string[]) {
    try {
      const { stdout, stderr } = await promisify(execFile)(
        process.execPath,
        [join(ROOT, "scripts", "verify-receipts.mjs"), ...args],
        { cwd: ROOT, timeout: 30_000 },
      );
      return { code: 0, stdout, stderr };
    } catch (error) {
      const failed = error as { code: number; stdout: string; stderr: string };
      return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
    }
  }

  it("exit 0 when every receipt verifies, 1 when one is broken, 2 when it cannot run", async () => {
    const dir = mkdtempSync(join(tmpdir(), "receipts-"));
    const write = (name: string, value: unknown) => {
      writeFileSync(join(dir, name), JSON.stringify(value));
      return join(dir, name);
    };
    const good = write("bundle.json", bundle);
    const keys = write("jwks.json", jwks);
    const broken = structuredClone(bundle);
    broken.receipts[1]!.payload.outcome.status = "failed";
    const bad = write("broken.json", broken);

    const ok = await cli([good, "--jwks", keys]);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toMatch(/3 receipts \(2 operations\) verify/);
    const no = await cli([bad, "--jwks", keys]);
    expect(no.code).toBe(1);
    expect(no.stdout).toMatch(/receipt 1 \(op_a\): the signature does not verify/);
    const missing = await cli([join(dir, "nope.json"), "--jwks", keys]);
    expect(missing).toMatchObject({
      code: 2,
      stderr: expect.stringMatching(/^verify-receipts: cannot read/),
    });
    expect((await cli([good])).code).toBe(2);
    expect((await cli([good, "--jwks", write("empty.json", {})])).stderr).toMatch(/no keys array/);
  });
});
