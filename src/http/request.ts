// Edge helpers shared by the routes: JSON bodies (content type, size, syntax, schema), wait
// durations (Prefer: wait=N or ?wait=N, capped), and Durable Object stubs by id.
import type { Context } from "hono";
import { z } from "zod";
import type { AppEnv } from "./auth.ts";
import { ApiProblem, toApiError, type ObjectError } from "./problem.ts";
import * as stubs from "../durable/stubs.ts";
import { describeInvalid, show } from "../domain/invalid-input.ts";
import { jsonTextProblem } from "../domain/strict-json.ts";
import type { Wait } from "../domain/wait.ts";

export const MAX_BODY_BYTES = 256 * 1024;
export const MAX_WAIT_MS = 30_000;
export const DEFAULT_TURN_WAIT_MS = 10_000;

export async function readJson<S extends z.ZodType>(
  c: Context<AppEnv>,
  schema: S,
): Promise<z.infer<S>> {
  const type = c.req.header("Content-Type") ?? "";
  if (!/^application\/([a-z.+-]*\+)?json\b/i.test(type))
    throw new ApiProblem({
      code: "unsupported_media_type",
      detail: "send Content-Type: application/json",
    });
  const text = await c.req.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new ApiProblem({ code: "invalid_json", detail: "the body is not valid JSON" });
  }
  const problem = jsonTextProblem(text);
  if (problem)
    throw new ApiProblem({ code: "invalid_json", detail: `the body is refused: ${problem}` });
  return parsedOrRefused(schema, body);
}

/**
 * The query string through its schema, refused as a body is: the parameter, the value given and
 * what it must be (every valid choice of a closed set). A parameter the schema does not name is
 * refused only by a strict schema.
 */
export function readQuery<S extends z.ZodType>(c: Context<AppEnv>, schema: S): z.infer<S> {
  return parsedOrRefused(schema, c.req.query());
}

/** `?force=1`, or nothing: any other value is refused rather than read as either (a tool's or a provider's change). */
export const forced = (c: Context<AppEnv>): boolean =>
  readQuery(c, z.object({ force: z.literal("1").optional() })).force === "1";

function parsedOrRefused<S extends z.ZodType>(schema: S, value: unknown): z.infer<S> {
  const parsed = schema.safeParse(value, { reportInput: true });
  if (!parsed.success)
    throw new ApiProblem({ code: "invalid_request", detail: describeInvalid(parsed.error) });
  return parsed.data;
}

/**
 * RFC 7240 `Prefer: wait=N` (seconds) or `?wait=N`, capped at MAX_WAIT_MS. A wait the client asked
 * for is a long-poll that holds out for a person's decision too; the default (`defaultMs`) does
 * not: a call waiting for a person lets the answer go at once. `wait=0` answers now.
 */
export function requestedWait(c: Context<AppEnv>, defaultMs: number): Wait {
  // Any value of the wait preference is read (RFC 7240 allows a quoted one), so a bad one is
  // refused by name rather than skipped as if no wait had been asked for.
  const prefer = /(?:^|[,;\s])wait=("[^"]*"|[^,;\s]*)/.exec(c.req.header("Prefer") ?? "")?.[1];
  const query = c.req.query("wait");
  const seconds = prefer?.replace(/^"(.*)"$/, "$1") ?? query;
  if (seconds === undefined) return { ms: defaultMs, holdForPeople: false };
  if (!/^\d+(?:\.\d+)?$/.test(seconds))
    throw new ApiProblem({
      code: "invalid_request",
      detail: `${prefer === undefined ? "?wait" : "Prefer: wait"} is a number of seconds (like wait=5), not ${show(seconds)}`,
    });
  const value = Number(seconds);
  return { ms: Math.min(MAX_WAIT_MS, value * 1000), holdForPeople: true };
}

/** The wait's duration alone, where it defaults to 0 (an operation's reads, a compensation). */
export const waitMs = (c: Context<AppEnv>, fallbackMs: number): number =>
  requestedWait(c, fallbackMs).ms;

// Ids may carry a jurisdiction tag (`run_eu_…`, `op_eu_…`): domain/jurisdiction.ts.
export { OPERATION_ID, RUN_ID } from "../domain/jurisdiction.ts";
export const TURN_ID = /^turn_[0-9a-f]{26}$/;

export function checkId(value: string, pattern: RegExp, what: string): string {
  if (!pattern.test(value))
    throw new ApiProblem({
      code: "not_found",
      detail: `no such ${what}: ${show(value)} is not a ${what} id`,
    });
  return value;
}

export const runStub = (c: Context<AppEnv>, runId: string) => stubs.runStub(c.env, runId);
export const operationStub = (c: Context<AppEnv>, operationId: string) =>
  stubs.operationStub(c.env, operationId);
export const tenantStub = (c: Context<AppEnv>, tenantId: string) =>
  stubs.tenantStub(c.env, tenantId);

/** Durable Object RPC results carry typed errors; this lifts them into the one HTTP mapping. */
export function unwrap<T>(result: { ok: true; value: T } | { ok: false; error: ObjectError }): T {
  if (result.ok) return result.value;
  throw new ApiProblem(toApiError(result.error));
}
