// Secrets in upstream traffic: they travel only over https (loopback http in development), and
// every injected secret value is scrubbed from whatever upstream text comes back before anyone
// stores or shows it — as itself and JSON-escaped, and always before the text is cut.
import { REDACTED } from "../domain/redact.ts";
import { CREDENTIAL_KEY, isLoopback } from "./manifest/url.ts";
import type { RequestContext } from "./spec.ts";

/** Secrets travel only over https (plain http to loopback is development's upstream). */
export function insecureForSecrets(url: string, ctx: RequestContext): string | null {
  if (Object.keys(ctx.secrets).length === 0) return null;
  const target = new URL(url);
  return target.protocol === "https:" || isLoopback(target.hostname)
    ? null
    : `refusing to send secrets over plain http to ${target.host}`;
}

/**
 * Upstream text (error snippets, results, connection errors) can echo a credential back; every
 * injected secret value is replaced before anything is stored in the trace or shown to the model.
 */
export function scrubSecrets<T>(value: T, secrets: readonly string[]): T {
  const live = secrets.filter((secret) => secret.length > 0);
  if (live.length === 0) return value;
  const scrub = (item: unknown): unknown => {
    if (typeof item === "string")
      return live.reduce((text, secret) => text.replaceAll(secret, "[redacted]"), item);
    if (Array.isArray(item)) return item.map(scrub);
    if (typeof item === "object" && item !== null)
      return Object.fromEntries(
        Object.entries(item).map(([key, inner]) => [scrub(key) as string, scrub(inner)]),
      );
    return item;
  };
  return scrub(value) as T;
}

/** How a secret can appear in upstream text: as itself, and JSON-escaped inside a JSON string. */
export function secretForms(secrets: readonly string[]): string[] {
  const live = secrets.filter((secret) => secret.length > 0);
  return [...new Set(live.flatMap((secret) => [secret, JSON.stringify(secret).slice(1, -1)]))];
}

/** Every form of every secret replaced in raw text (before it is cut or parsed). */
export const scrubText = (text: string, secrets: readonly string[]): string =>
  secretForms(secrets).reduce((out, form) => out.replaceAll(form, REDACTED), text);

/**
 * A request as the trace keeps it: every form of every secret's value replaced by its name
 * (`{secret:NAME}`, as a shadow run's would-be request shows it; the user's token as
 * `{credential}`), longest value first so a secret
 * that contains another is named whole.
 */
export function maskSecrets<T>(value: T, secrets: Record<string, string>): T {
  const named = Object.entries(secrets)
    .filter(([, secret]) => secret.length > 0)
    .sort(([, a], [, b]) => b.length - a.length);
  if (named.length === 0) return value;
  const mask = (text: string) =>
    named.reduce(
      (out, [name, secret]) =>
        secretForms([secret]).reduce(
          (masked, form) =>
            masked.replaceAll(form, name === CREDENTIAL_KEY ? "{credential}" : `{secret:${name}}`),
          out,
        ),
      text,
    );
  const walk = (item: unknown): unknown => {
    if (typeof item === "string") return mask(item);
    if (Array.isArray(item)) return item.map(walk);
    if (typeof item === "object" && item !== null)
      return Object.fromEntries(
        Object.entries(item).map(([key, inner]) => [mask(key), walk(inner)]),
      );
    return item;
  };
  return walk(value) as T;
}
