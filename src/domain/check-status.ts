// The built-in read tool `toolgate_check_status`: offered in every run that offers a write, so the
// `check_status` next action of a waiting or unknown envelope is something the model can do. Its
// argument is one operation id; its result is that operation's current envelope, for operations
// of the same run only (anything else is indistinguishable from a missing one). The RunObject
// answers it itself — it never reaches an upstream and costs nothing; a run answers a limited
// number of them (RUN_LIMITS.maxStatusChecks), then refuses each in its envelope. Pure.
import type { ToolDefinition, ToolSpec } from "../tools/spec.ts";
import { canonicalJson, sha256Hex } from "./canonical-json.ts";
import { refusal, type Envelope } from "./envelope.ts";
import { err, ok, type Result } from "./result.ts";
import { OPERATION_ID } from "./jurisdiction.ts";

export const CHECK_STATUS = "toolgate_check_status";

export const CHECK_STATUS_DEFINITION: ToolDefinition = {
  name: CHECK_STATUS,
  description:
    "Look up the current result of an earlier call in this conversation by its operation_id (from that call's result). Use it when a call said it is running, waiting for approval, or being checked; it never repeats or changes anything.",
  inputJsonSchema: {
    type: "object",
    additionalProperties: false,
    properties: {
      operation_id: {
        type: "string",
        description: "The operation_id from an earlier call's result, e.g. op_3f…",
      },
    },
    required: ["operation_id"],
  },
  bound: [],
  risk: "read",
  builtIn: true,
};

/** Only runs that offer a write: a read is never left pending for long or outcome_unknown. */
export const offersCheckStatus = (offered: Iterable<ToolSpec>): boolean =>
  [...offered].some((spec) => spec.risk !== "read");

/** The operation id a call asks about, or why the call is refused (the gate's wording). */
export function checkStatusTarget(args: unknown): Result<string, string> {
  let value = args;
  if (typeof value === "string") {
    try {
      value = value.trim() === "" ? {} : JSON.parse(value);
    } catch {
      return err('The arguments are not valid JSON. Send {"operation_id": "op_…"}.');
    }
  }
  if (typeof value !== "object" || value === null || Array.isArray(value))
    return err('Send {"operation_id": "op_…"}.');
  const extra = Object.keys(value).filter((key) => key !== "operation_id");
  if (extra.length > 0)
    return err(`${extra[0]} is not a parameter of this tool; send only operation_id.`);
  const id = (value as { operation_id?: unknown }).operation_id;
  if (typeof id !== "string" || !OPERATION_ID.test(id))
    return err(
      "operation_id must be an operation id (op_…) copied exactly from an earlier call's result.",
    );
  return ok(id);
}

/** The check's own id (every envelope carries one): stable per run and call. */
export const checkStatusId = async (
  tenantId: string,
  runId: string,
  callId: string,
): Promise<string> =>
  `op_${(await sha256Hex(canonicalJson([tenantId, runId, CHECK_STATUS, callId]))).slice(0, 32)}`;

/**
 * Whether this run may read the operation: it created it (the frozen run id), or one of its calls
 * joined it with the identical input hash, and so already receives that very result through its
 * own call (bound identity fields are part of the input). A call refused as a conflict points at
 * the operation too, with another hash: that never counts, or a tenant-scoped key would let any
 * run read another's result.
 */
export const mayReadOperation = (
  runId: string,
  operation: { run_id: string; input_hash: string },
  ownHashes: readonly string[],
): boolean => operation.run_id === runId || ownHashes.includes(operation.input_hash);

/** The answer: the target's envelope as the result, or a refusal when it is not an operation of this run. */
export function checkStatusEnvelope(
  checkId: string,
  target: Result<string, string>,
  current: Envelope | null,
): Envelope {
  if (!target.ok)
    return refusal(
      "rejected",
      checkId,
      "invalid_arguments",
      `${target.error} Fix the arguments and call again.`,
    );
  if (!current)
    return refusal(
      "rejected",
      checkId,
      "not_found",
      `There is no operation ${target.value} in this conversation. Use an operation_id from an earlier call's result; do not guess one.`,
    );
  return { status: "succeeded", operation_id: checkId, result: current };
}

/** A check past the run's allowance: refused, and nothing was looked up. */
export const checkStatusSpent = (checkId: string, allowance: number): Envelope =>
  refusal(
    "budget_exhausted",
    checkId,
    "max_status_checks",
    `This conversation has used up its ${allowance} status checks, so nothing was looked up. Do not call ${CHECK_STATUS} again; tell the user you could not check on the operation from here.`,
  );
