// Receipts (issue 37): an operation's signed receipts (GET /v1/operations/{id}/receipt: the latest
// and its chain), a bundle of them for one operation, run or subject (GET /v1/receipts, the subject
// as the tenant index means it: `cus_42` or `customer_id:cus_42`), the tenant's public keys (GET
// /v1/receipts/jwks, and unauthenticated at /public/{tenant}/receipts/jwks.json) and their rotation
// (POST /v1/receipts/keys/rotate, scope receipts:admin). Reading needs traces:read; another
// tenant's operation answers exactly as an unknown one.
import { Hono, type Context } from "hono";
import { z } from "zod";
import { SignedReceiptSchema, type SignedReceipt } from "../domain/receipt.ts";
import { TENANT_ID } from "../domain/jurisdiction.ts";
import { indexStub } from "../durable/stubs.ts";
import { requireScope, type AppEnv } from "./auth.ts";
import { ApiProblem } from "./problem.ts";
import {
  checkId,
  OPERATION_ID,
  operationStub,
  readQuery,
  RUN_ID,
  tenantStub,
  unwrap,
} from "./request.ts";

export const BUNDLE_TYPE = "toolgate.receipt-bundle/v1";

/** The answers, as published in the OpenAPI document. */
export const ReceiptBundle = z
  .object({
    type: z.literal(BUNDLE_TYPE),
    tenant: z.string(),
    jwks: z.string().describe("where the tenant's public keys are (no credential needed)"),
    receipts: z.array(SignedReceiptSchema),
    next_cursor: z.string().nullable(),
  })
  .strict();
export const OperationReceipt = z
  .object({
    operation_id: z.string(),
    receipt: SignedReceiptSchema.describe("the latest"),
    chain: z.array(SignedReceiptSchema).describe("every receipt of the operation, oldest first"),
  })
  .strict();
export const ReceiptJwks = z
  .object({
    keys: z.array(
      z
        .object({
          kty: z.literal("OKP"),
          crv: z.literal("Ed25519"),
          x: z.string(),
          kid: z.string(),
          alg: z.literal("EdDSA"),
          use: z.literal("sig"),
          not_before: z.iso.datetime(),
          not_after: z.iso.datetime(),
        })
        .strict(),
    ),
  })
  .strict();

/** GET /v1/receipts: exactly one of operation_id, run_id, subject; a page of operations at a time. */
export const ReceiptsQuery = z
  .object({
    operation_id: z.string().regex(OPERATION_ID).optional(),
    run_id: z.string().regex(RUN_ID).optional(),
    subject: z.string().min(1).max(200).optional(),
    cursor: z
      .string()
      .regex(/^[A-Za-z0-9_-]{1,200}$/)
      .optional(),
    limit: z.coerce.number().int().min(1).max(100).default(50),
  })
  .strict();

/** An operation's chain as served, or a refusal: not found (another tenant's too), not settled, not signed yet. */
async function chainOf(c: Context<AppEnv>, tenantId: string, operationId: string) {
  const stub = operationStub(c, operationId);
  const chain = await stub.receiptChain(tenantId);
  if (chain.receipts.length > 0) return chain.receipts;
  if (chain.pending)
    throw new ApiProblem({
      code: "receipt_pending",
      detail: `operation ${operationId} is settled; its receipt could not be signed just now (${chain.pending}); try again`,
    });
  // Unknown, another tenant's, or not settled: the view says which (and refuses the first two alike).
  const view = unwrap(await stub.get(tenantId, 0));
  throw new ApiProblem({
    code: "receipt_not_ready",
    detail: `operation ${operationId} is not settled (${view.phase}); its receipt is signed when it is`,
    state: view.phase,
  });
}

/** GET /v1/operations/{operation_id}/receipt (mounted by operations-routes.ts). */
export async function operationReceipt(c: Context<AppEnv>) {
  const operationId = checkId(c.req.param("operation_id") ?? "", OPERATION_ID, "operation");
  const tenantId = requireScope(c, "traces:read");
  const chain = await chainOf(c, tenantId, operationId);
  return c.json({ operation_id: operationId, receipt: chain.at(-1)!, chain });
}

export const receiptRoutes = new Hono<AppEnv>()
  .get("/jwks", async (c) => {
    const tenantId = requireScope(c, "traces:read");
    return c.json({ keys: unwrap(await tenantStub(c, tenantId).receiptJwks(tenantId)) });
  })
  .post("/keys/rotate", async (c) => {
    const tenantId = requireScope(c, "receipts:admin");
    return c.json({ keys: unwrap(await tenantStub(c, tenantId).rotateReceiptKey(tenantId)) });
  })
  .get("/", async (c) => {
    const tenantId = requireScope(c, "traces:read");
    const query = readQuery(c, ReceiptsQuery);
    const given = [query.operation_id, query.run_id, query.subject].filter((v) => v !== undefined);
    if (given.length !== 1)
      throw new ApiProblem({
        code: "invalid_request",
        detail: "name exactly one of operation_id, run_id or subject",
      });
    if (query.operation_id) {
      if (query.cursor)
        throw new ApiProblem({
          code: "invalid_request",
          detail: "cursor pages a run or a subject",
        });
      const receipts = await chainOf(c, tenantId, query.operation_id);
      return c.json(bundle(tenantId, receipts, null));
    }
    // A run's or a subject's operations, as the tenant index lists them (newest first).
    const page = await indexStub(c.env, tenantId).listOperations({
      limit: query.limit,
      ...(query.run_id ? { run_id: query.run_id } : { subject: query.subject! }),
      ...(query.cursor ? { cursor: query.cursor } : {}),
    });
    if (!page) throw new ApiProblem({ code: "invalid_request", detail: "the cursor is not valid" });
    const chains = await Promise.all(
      page.items.map((item) => operationStub(c, item.operation_id).receiptChain(tenantId)),
    );
    return c.json(
      bundle(
        tenantId,
        chains.flatMap((chain) => chain.receipts),
        page.next_cursor,
      ),
    );
  });

function bundle(tenantId: string, receipts: SignedReceipt[], nextCursor: string | null) {
  return {
    type: BUNDLE_TYPE,
    tenant: tenantId,
    jwks: `/public/${tenantId}/receipts/jwks.json`,
    receipts,
    next_cursor: nextCursor,
  };
}

/** Unauthenticated: a third party fetches the keys to verify with (no private data, every key ever used). */
export const publicReceiptRoutes = new Hono<AppEnv>().get(
  "/:tenant_id/receipts/jwks.json",
  async (c) => {
    const tenantId = checkId(c.req.param("tenant_id"), TENANT_ID, "tenant");
    const keys = unwrap(await tenantStub(c, tenantId).receiptJwks(tenantId));
    c.header("Cache-Control", "public, max-age=60");
    return c.json({ keys });
  },
);
