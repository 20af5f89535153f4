// URL templates and the request builder. The URL template becomes a builder whose scheme, host,
// port and static path prefix no argument can change (encodeURIComponent keeps "." and the URL
// parser removes dot segments, so "", "." and ".." are refused outright and the parsed path is
// checked against the prefix). Secrets are the tenant's own, named in headers only, and travel only
// over https (plain http only to loopback in development).
import { err, ok, type Result } from "../../domain/result.ts";
import type { RequestBuilder } from "../spec.ts";
import type { HostPolicy, ManifestError } from "./schema.ts";

const SECRET_REF = /\{secret:([A-Za-z0-9_]+)\}/g;
/** The run's end user's access token (issue 36): headers only, like a secret. */
export const CREDENTIAL_REF = /\{credential\}/g;
/**
 * Where the access token rides in a request's secrets (fetched just before the send): a key no
 * tenant secret can have, so every scrub and mask of secrets covers it too.
 */
export const CREDENTIAL_KEY = "oauth:credential";

const LOOPBACK = new Set(["127.0.0.1", "localhost", "[::1]", "::1"]);
export const isLoopback = (hostname: string) => LOOPBACK.has(hostname);

/** Checks one request template; returns the tenant secrets its headers name. */
export function checkTemplate(
  template: { url: string; headers: Record<string, string> },
  hosts: HostPolicy,
): Result<string[], ManifestError> {
  // Placeholders may only appear after the authority: no argument can alter scheme, host or port.
  const authority = /^(https?):\/\/([^/?#]+)/.exec(template.url);
  if (!authority)
    return err({
      code: "invalid_manifest",
      detail: `url must be absolute http(s): ${template.url}`,
    });
  if (authority[2]!.includes("{"))
    return err({
      code: "invalid_manifest",
      detail: "placeholders are not allowed in the scheme, host or port",
    });
  if (template.url.includes("{secret:") || template.url.includes("{credential}"))
    return err({
      code: "invalid_manifest",
      detail: "secrets may be referenced in headers only, never in a url",
    });
  let origin: URL;
  try {
    origin = new URL(`${authority[1]}://${authority[2]}`);
    buildUrl(template.url, {}, "k");
  } catch {
    return err({
      code: "invalid_manifest",
      detail: `url is not a valid URL template: ${template.url}`,
    });
  }
  const port = Number(origin.port || (origin.protocol === "https:" ? 443 : 80));
  const host = origin.hostname;
  const loopback = hosts.allowLoopback && isLoopback(host);
  if (!loopback && !hosts.allowlist.some((entry) => allows(entry, host, port, origin.protocol))) {
    return err({
      code: "upstream_not_allowed",
      detail: `${host}:${port} is not on TOOLGATE_UPSTREAM_ALLOWLIST`,
    });
  }
  const names: string[] = [];
  for (const [header, value] of Object.entries(template.headers)) {
    const refs = [...value.matchAll(SECRET_REF)].map((match) => match[1]!);
    if (value.replace(SECRET_REF, "").includes("{secret:"))
      return err({
        code: "invalid_manifest",
        detail: `header ${header}: secret names are letters, digits and _`,
      });
    names.push(...refs);
  }
  const credential = Object.values(template.headers).some((v) => v.includes("{credential}"));
  if ((names.length > 0 || credential) && origin.protocol !== "https:" && !loopback) {
    return err({
      code: "invalid_manifest",
      detail: `secrets are sent only over https; ${template.url} is plain http`,
    });
  }
  return ok(names);
}

export function allows(entry: string, host: string, port: number, protocol: string): boolean {
  const pinned = /^(.*):(\d{1,5})$/.exec(entry);
  const pattern = pinned ? pinned[1]! : entry;
  const allowedPort = pinned ? Number(pinned[2]) : protocol === "https:" ? 443 : 80;
  const hostMatches = pattern.startsWith("*.") ? host.endsWith(pattern.slice(1)) : host === pattern;
  return hostMatches && port === allowedPort;
}

/**
 * The URL for `input`: `{field}` → the URL-encoded argument, `{idempotency_key}` → the key, and for
 * a paid tool (`paymentId` given, issue 37) `{payment_id}` → its stored payment's id. A path
 * value of "", "." or ".." is refused, and the parsed URL must keep the template's origin and its
 * static path prefix (everything before the first placeholder).
 */
export function buildUrl(
  template: string,
  input: Record<string, unknown>,
  idempotencyKey: string,
  paymentId?: string | null,
): Result<string, string> {
  const queryAt = template.search(/[?#]/);
  const pathEnd = queryAt === -1 ? template.length : queryAt;
  const firstPlaceholder = template.indexOf("{");
  const prefix = new URL(
    template.slice(
      0,
      firstPlaceholder === -1 || firstPlaceholder > pathEnd ? pathEnd : firstPlaceholder,
    ),
  );
  let problem: string | null = null;
  const url = template.replace(/\{([a-zA-Z0-9_]+)\}/g, (_, field: string, offset: number) => {
    const value =
      field === "idempotency_key"
        ? idempotencyKey
        : field === "payment_id" && paymentId !== undefined
          ? (paymentId ?? "")
          : stringify(input[field]);
    if (offset < pathEnd && (value === "" || value === "." || value === ".."))
      problem ??= `${field} cannot be ${JSON.stringify(value)}: it is a segment of the tool's URL path`;
    return encodeURIComponent(value);
  });
  if (problem) return err(problem);
  const built = new URL(url);
  if (built.origin !== prefix.origin || !built.pathname.startsWith(prefix.pathname))
    return err(`the arguments would move the request outside ${prefix.origin}${prefix.pathname}`);
  return ok(built.toString());
}

/** `{secret:NAME}` → the tenant's secret (headers only), `{idempotency_key}` → the key; the body is the frozen input. */
export function requestBuilder(
  method: string,
  urlTemplate: string,
  headerTemplates: Record<string, string>,
  sendsBody: boolean,
): RequestBuilder {
  return (input, ctx) => {
    const url = buildUrl(urlTemplate, input.value, ctx.idempotencyKey, ctx.paymentId);
    if (!url.ok) return { error: url.error };
    const headers: Record<string, string> = {};
    for (const [name, template] of Object.entries(headerTemplates)) {
      let missing: string | null = null;
      headers[name] = template
        .replace(/\{idempotency_key\}/g, ctx.idempotencyKey)
        .replace(CREDENTIAL_REF, () => {
          const value = ctx.secrets[CREDENTIAL_KEY];
          if (value === undefined) missing = "{credential}";
          return value ?? "";
        })
        .replace(SECRET_REF, (_, secret: string) => {
          const value = ctx.secrets[secret];
          if (value === undefined) missing = secret;
          return value ?? "";
        });
      if (missing === "{credential}")
        return { error: "the user's credential was not fetched for this request" };
      if (missing)
        return { error: `the tenant secret ${missing} is not defined (was it deleted?)` };
    }
    const body = sendsBody && method !== "GET" && method !== "DELETE" ? input.canonical : null;
    if (body !== null) headers["Content-Type"] = "application/json";
    return { method, url: url.value, headers, body };
  };
}

/**
 * `order:{order_id}` → `order:ord%2F1`: argument values URL-encoded into the lock key, so no value
 * can make two different resources share a key (or one resource have two).
 */
export function resourceKeyFor(
  template: string | null,
): (input: Record<string, unknown>) => string | null {
  if (template === null) return () => null;
  return (input) =>
    template.replace(/\{([a-zA-Z0-9_]+)\}/g, (_, field: string) =>
      encodeURIComponent(stringify(input[field])),
    );
}

const stringify = (value: unknown): string =>
  typeof value === "string" ? value : value === undefined ? "" : JSON.stringify(value);
