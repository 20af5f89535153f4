// Logical operation identity. The operation id is a hash of (tenant, scope, tool, operation key);
// the idempotency key sent upstream is derived from the operation id alone, so it is identical
// on every attempt, after every crash, and whichever call id the model used to propose it.
import { canonicalJson, sha256Hex } from "./canonical-json.ts";

export type OperationId = `op_${string}`;
export type Risk = "read" | "write" | "irreversible_write";
export type OperationScope = "run" | "tenant";

export type IdentityInput = {
  tenantId: string;
  runId: string;
  tool: string;
  risk: Risk;
  scope: OperationScope;
  /** Business-key field names; empty means the whole input is the key. */
  operationKey: readonly string[];
  input: Record<string, unknown>;
  callId: string;
};

/** A call's input as frozen at validation: the value, its RFC 8785 text and that text's SHA-256. */
export type FrozenInput = { value: Record<string, unknown>; canonical: string; hash: string };

export type FrozenCall = {
  operationId: OperationId;
  idempotencyKey: string;
  canonicalInput: string;
  inputHash: string;
};

export async function freezeCall(call: IdentityInput): Promise<FrozenCall> {
  const canonicalInput = canonicalJson(call.input);
  const inputHash = await sha256Hex(canonicalInput);
  // Reads are safe to repeat: only a replay of the same call is deduplicated (and only within the run).
  const key =
    call.risk === "read"
      ? { call: call.callId }
      : call.operationKey.length === 0
        ? { input: call.input }
        : {
            fields: Object.fromEntries(
              call.operationKey.map((field) => [field, call.input[field] ?? null]),
            ),
          };
  const scopeValue = call.risk === "read" || call.scope === "run" ? `run:${call.runId}` : "tenant";
  const digest = await sha256Hex(canonicalJson([call.tenantId, scopeValue, call.tool, key]));
  const operationId: OperationId = `op_${digest.slice(0, 32)}`;
  return { operationId, idempotencyKey: idempotencyKeyFor(operationId), canonicalInput, inputHash };
}

export const idempotencyKeyFor = (operationId: OperationId): string => `tg_${operationId.slice(3)}`;
