// Shadow runs (issue 22): what a shadow operation records and where its requests go. Pure.
// `wouldSend` builds the production request exactly as an attempt would, with every secret shown
// by name only (`{secret:NAME}`: the values are never read for it) and config values by name too.
// `sandboxed` is the ONE place a request's destination is decided: a live operation's request is
// unchanged; a shadow operation's goes to its tool's sandbox origin, or is answered with its
// sandbox result, or (no sandbox) goes nowhere. Every request of an operation (attempt, retry,
// status lookup, approver's preview) passes through it (http-tool.ts), whatever the route asks.
import type { WouldSend } from "../domain/operation/state.ts";
import type { FrozenInput } from "../domain/identity.ts";
import { rebaseUrl } from "./manifest/sandbox.ts";
import type { BuiltRequest, RequestBuilder, SendRoute, ToolSpec } from "./spec.ts";

export function wouldSend(spec: ToolSpec, input: FrozenInput, idempotencyKey: string): WouldSend {
  const byName = (names: readonly string[], kind: string) =>
    Object.fromEntries(names.map((name) => [name, `{${kind}:${name}}`]));
  const ctx = {
    idempotencyKey,
    secrets: byName(spec.secretNames, "secret"),
    config: byName(spec.configNames, "config"),
  };
  let built: ReturnType<RequestBuilder>;
  try {
    built = spec.buildRequest(input, ctx);
  } catch (error) {
    return { error: `the request could not be built: ${String(error)}` };
  }
  if ("error" in built) return built;
  const headers = { ...built.headers };
  if (spec.idempotency.mode === "header" && spec.idempotency.header)
    headers[spec.idempotency.header] = idempotencyKey;
  return { method: built.method, url: built.url, headers, body: built.body };
}

/** Where one built request goes: itself (live), rebased or answered (sandbox), or nowhere. */
export type Routed = { send: BuiltRequest } | { answer: unknown } | { refuse: string };

export function sandboxed(built: BuiltRequest, route: SendRoute): Routed {
  if (route.to === "production") return { send: built };
  if (route.to === "missing")
    return {
      refuse:
        "this operation belongs to a shadow run and its tool declares no sandbox: nothing was sent",
    };
  const { sandbox } = route;
  return sandbox.kind === "result"
    ? { answer: sandbox.result }
    : { send: { ...built, url: rebaseUrl(built.url, sandbox.baseUrl) } };
}

/** The route of an operation's requests, from its frozen plan alone. */
export const routeOf = (plan: { shadow?: unknown }, spec: ToolSpec): SendRoute =>
  plan.shadow === undefined
    ? { to: "production" }
    : spec.sandbox === null
      ? { to: "missing" }
      : { to: "sandbox", sandbox: spec.sandbox };
