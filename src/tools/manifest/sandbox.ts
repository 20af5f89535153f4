// A manifest's `sandbox` (shadow runs, DESIGN "Shadow runs and undo") → the spec's ToolSandbox,
// checked at PUT like every URL: an origin on the deployment allow-list (https when the request
// carries secrets), or a fixed answer that the tool's output schema accepts. Writes only: a read
// runs as usual in a shadow run, so a read's sandbox would be accepted and ignored.
import type { z } from "zod";
import { jsonTextProblem } from "../../domain/strict-json.ts";
import { err, ok, type Result } from "../../domain/result.ts";
import type { ToolSandbox } from "../spec.ts";
import type { HostPolicy, Manifest, ManifestError } from "./schema.ts";
import { checkTemplate } from "./url.ts";

export function compileSandbox(
  m: Manifest,
  output: z.ZodType | null,
  hosts: HostPolicy,
): Result<ToolSandbox | null, ManifestError> {
  const declared = m.sandbox;
  if (declared === undefined) return ok(null);
  const invalid = (detail: string) => err({ code: "invalid_manifest" as const, detail });
  if (m.risk === "read")
    return invalid("sandbox: a read runs as usual in a shadow run; only writes have a sandbox");
  if ("base_url" in declared) {
    let origin: URL;
    try {
      origin = new URL(declared.base_url);
    } catch {
      return invalid("sandbox.base_url must be an absolute http(s) URL");
    }
    if (
      (origin.protocol !== "https:" && origin.protocol !== "http:") ||
      origin.search !== "" ||
      origin.hash !== "" ||
      origin.username !== "" ||
      origin.password !== ""
    )
      return invalid(
        "sandbox.base_url is an origin with an optional path prefix, e.g. https://sandbox.example.com (no query or credentials)",
      );
    // The same checks as the request itself: allow-list, and secrets only over https.
    const base = `${origin.origin}${origin.pathname.replace(/\/+$/, "")}`;
    for (const template of [
      m.request,
      ...(m.reconcile ? [m.reconcile] : []),
      ...(m.preview ? [m.preview] : []),
    ]) {
      const checked = checkTemplate(
        { url: rebaseUrl(template.url, base), headers: template.headers },
        hosts,
      );
      if (!checked.ok)
        return err({ ...checked.error, detail: `sandbox.base_url: ${checked.error.detail}` });
    }
    return ok({ kind: "base_url", baseUrl: base });
  }
  if (!("result" in declared) || declared.result === undefined)
    return invalid("sandbox needs a base_url or a result");
  const text = JSON.stringify(declared.result);
  const problem = jsonTextProblem(text);
  if (problem) return invalid(`sandbox.result: ${problem}`);
  if (output) {
    const checked = output.safeParse(declared.result);
    if (!checked.success)
      return invalid(
        `sandbox.result does not match the output schema: ${checked.error.issues.map((i) => i.message).join("; ")}`,
      );
  }
  return ok({ kind: "result", result: declared.result });
}

/**
 * The sandbox's base in place of the URL's origin: the production path, query and fragment follow
 * it (`https://api.shop/v1/charges` → `https://sandbox.shop/v1/charges`, or under a prefix).
 */
export const rebaseUrl = (url: string, base: string): string =>
  url.replace(/^https?:\/\/[^/?#]+/, base);
