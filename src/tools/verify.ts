// POST /v1/tools/{name}/verify, the sending half: prepare the probe (the tool compiled against an
// optional sandbox origin, the arguments admitted by the same gate a run uses, one argument changed
// for the "changed body" check), then send the checks through the executor's own request path and
// let domain/verification.ts judge them. Nothing is sent unless everything above is valid.
// The verdict binds to the hash of the settings it tested (request, idempotency, reconcile).
import { z } from "zod";
import { canonicalJson, sha256Hex } from "../domain/canonical-json.ts";
import { needsApproval } from "../domain/operation/index.ts";
import { admitCall } from "../domain/turn/gate.ts";
import type { FrozenInput } from "../domain/identity.ts";
import { checkLimits } from "../domain/turn/policy.ts";
import { err, ok, type Result } from "../domain/result.ts";
import {
  changeOneArgument,
  judgeChangedBody,
  judgeConcurrent,
  judgeFirstSend,
  judgeLookupFound,
  judgeLookupMissing,
  judgeReplay,
  skippedCheck,
  verdictOf,
} from "../domain/verification-judges.ts";
import type { Check, Verification } from "../domain/verification.ts";
import { sendProbe } from "./probe.ts";
import { compileManifestTool } from "./catalog.ts";
import { Manifest, type HostPolicy, type ManifestError } from "./manifest/schema.ts";
import type { ToolSpec } from "./spec.ts";

/** The verify request body. `context` fills the tool's bound arguments (and limits), as a run's would. */
export const VerifyTool = z.strictObject({
  arguments: z.record(z.string(), z.unknown()),
  context: z.record(z.string(), z.unknown()).default({}),
  base_url: z.string().max(2048).optional(),
});
export type VerifyTool = z.infer<typeof VerifyTool>;

export type VerifyError =
  | ManifestError
  | { code: "forbidden"; detail: string }
  | { code: "not_verifiable"; detail: string }
  | { code: "invalid_arguments"; detail: string }
  | { code: "policy_denied"; detail: string }
  | { code: "invalid_request"; detail: string };

export type PreparedVerification = {
  spec: ToolSpec;
  input: Record<string, unknown>;
  changed: { field: string; input: Record<string, unknown> };
  settingsHash: string;
  baseUrl: string | null;
};

/** The settings a verdict vouches for; editing anything else (description, schemas, limits) keeps it. */
export async function verificationSettingsHash(manifest: unknown): Promise<string | null> {
  const parsed = Manifest.safeParse(manifest);
  if (!parsed.success) return null;
  const { request, idempotency, reconcile } = parsed.data;
  return sha256Hex(canonicalJson({ request, idempotency, reconcile: reconcile ?? null }));
}

/**
 * `mayDecideApprovals`: the caller's key also holds `approvals:decide`. Verify sends real writes
 * with the tenant's secrets and asks no one, so a tool whose approval rule would ask a person
 * about these requests is verified against its own origin only by a key that may approve them;
 * any `tools:write` key may verify it against a sandbox `base_url`.
 */
export async function prepareVerification(
  manifest: unknown,
  body: VerifyTool,
  hosts: HostPolicy,
  mayDecideApprovals: boolean,
): Promise<Result<PreparedVerification, VerifyError>> {
  const parsed = Manifest.safeParse(manifest);
  if (!parsed.success)
    return err({ code: "invalid_manifest", detail: "the stored tool is invalid" });
  const m = parsed.data;
  if (m.risk === "read" || m.idempotency.mode !== "header")
    return err({
      code: "not_verifiable",
      detail: `only writes with idempotency mode "header" promise deduplication by key; this tool is a ${m.risk} with mode "${m.idempotency.mode}"`,
    });
  const rebased = body.base_url === undefined ? ok(m) : rebase(m, body.base_url);
  if (!rebased.ok) return rebased;
  // Compiled against the deployment's allow-list: a sandbox origin off the list is refused here.
  const compiled = compileManifestTool(rebased.value, hosts);
  if (!compiled.ok) return compiled;
  const spec = compiled.value;
  const admitted = admitCall(
    { id: "verify", name: spec.name, arguments: body.arguments },
    new Map([[spec.name, spec]]),
    body.context,
    spec.requiresScopes,
  );
  if (!admitted.ok)
    return err({
      code: admitted.error.code === "policy_denied" ? "policy_denied" : "invalid_arguments",
      detail: admitted.error.message,
    });
  const input = admitted.value.input;
  const inUrls = new Set(
    [m.request.url, m.reconcile?.url ?? ""].flatMap((url) =>
      [...url.matchAll(/\{([a-zA-Z0-9_]+)\}/g)].map((match) => match[1]!),
    ),
  );
  const properties = (spec.inputJsonSchema.properties ?? {}) as Record<
    string,
    { enum?: unknown[] }
  >;
  const changed = changeOneArgument(
    input,
    properties,
    new Set([...Object.keys(spec.bind), ...inUrls]),
    (candidate) =>
      spec.input.safeParse(candidate).success &&
      spec.checkArguments(candidate) === null &&
      checkLimits(spec.limits, candidate, body.context).ok,
  );
  if (!changed)
    return err({
      code: "not_verifiable",
      detail:
        "no single argument (other than bound and URL fields) can be changed to another value the schema accepts, so the changed-body check cannot be sent",
    });
  const baseUrl = sandboxOrigin(m, rebased.value);
  const asks = needsApproval(spec.approval, input) || needsApproval(spec.approval, changed.input);
  if (baseUrl === null && asks && !mayDecideApprovals)
    return err({
      code: "forbidden",
      detail: `${spec.name} needs a person's approval for these arguments, and verify would send them to its own origin with no one asked: use a key that also holds approvals:decide, or verify against a sandbox base_url`,
    });
  return ok({
    spec,
    input,
    changed,
    settingsHash: (await verificationSettingsHash(manifest))!,
    baseUrl,
  });
}

/** The input as the executor takes it: the value, its canonical JSON (the body) and its hash. */
async function freeze(value: Record<string, unknown>): Promise<FrozenInput> {
  const canonical = canonicalJson(value);
  return { value, canonical, hash: await sha256Hex(canonical) };
}

/**
 * The origin the checks go to when it is not the tool's own (a sandbox), else null. Only a verdict
 * with null vouches for the tool (domain/verification.ts countedStatus): a `base_url` naming the
 * tool's own origin is a check of production, anything else is not.
 */
function sandboxOrigin(m: Manifest, rebased: Manifest): string | null {
  const same = rebased.request.url === m.request.url && rebased.reconcile?.url === m.reconcile?.url;
  return same ? null : new URL(rebased.request.url).origin;
}

/** A sandbox origin replaces the origin of the request and the status lookup (paths stay). */
function rebase(m: Manifest, baseUrl: string): Result<Manifest, VerifyError> {
  let origin: URL;
  try {
    origin = new URL(baseUrl);
  } catch {
    return err({ code: "invalid_request", detail: "base_url must be an absolute http(s) URL" });
  }
  if (
    (origin.protocol !== "https:" && origin.protocol !== "http:") ||
    (origin.pathname !== "/" && origin.pathname !== "") ||
    origin.search !== "" ||
    origin.hash !== "" ||
    origin.username !== "" ||
    origin.password !== ""
  )
    return err({
      code: "invalid_request",
      detail:
        "base_url is an origin only, e.g. https://sandbox.example.com (no path, query or credentials)",
    });
  const swap = (url: string) => url.replace(/^https?:\/\/[^/?#]+/, origin.origin);
  return ok({
    ...m,
    request: { ...m.request, url: swap(m.request.url) },
    ...(m.reconcile ? { reconcile: { ...m.reconcile, url: swap(m.reconcile.url) } } : {}),
  });
}

/**
 * Sends the checks in order: K fresh, K again, K with one argument changed, two concurrent sends
 * with a fresh K2, then (with a status lookup) K and a never-used K3. When the first send fails,
 * nothing else is sent. `newKey` gives fresh keys; `checkedAt` stamps the verdict.
 */
export async function runVerification(
  prepared: PreparedVerification,
  secrets: Record<string, string>,
  newKey: () => string,
  checkedAt: () => string,
): Promise<Verification> {
  const { spec } = prepared;
  const ctx = (idempotencyKey: string) => ({ idempotencyKey, secrets, config: {} });
  const [input, changed] = await Promise.all([
    freeze(prepared.input),
    freeze(prepared.changed.input),
  ]);
  const send = (args: FrozenInput, key: string) => sendProbe(spec, "request", args, ctx(key));
  const lookup = (key: string) => sendProbe(spec, "reconcile", input, ctx(key));
  const [k, k2, k3] = [newKey(), newKey(), newKey()];
  const first = await send(input, k);
  const checks: Check[] = [judgeFirstSend(first)];
  if (checks[0]!.status !== "passed") {
    checks.push(
      skippedCheck("same_key_replay"),
      skippedCheck("changed_body_refused"),
      skippedCheck("concurrent_duplicate"),
    );
    if (spec.buildReconcile)
      checks.push(skippedCheck("lookup_finds_effect"), skippedCheck("lookup_unknown_key"));
    return verdictOf(checks, checkedAt(), prepared.settingsHash, prepared.baseUrl);
  }
  checks.push(judgeReplay(first, await send(input, k)));
  checks.push(judgeChangedBody(prepared.changed.field, await send(changed, k)));
  const [a, b] = await Promise.all([send(input, k2), send(input, k2)]);
  checks.push(judgeConcurrent(a, b));
  if (spec.buildReconcile) {
    checks.push(judgeLookupFound(await lookup(k)));
    checks.push(judgeLookupMissing(await lookup(k3)));
  }
  return verdictOf(checks, checkedAt(), prepared.settingsHash, prepared.baseUrl);
}
