// A manifest's `auth` (issue 36) and its `{credential}` template go together: a header that says
// `{credential}` needs `auth` (whose token would it be?), and `auth` needs a header that sends it
// (never accepted and ignored). Whether the provider exists is the tenant's check at PUT
// (tenant/registry.ts), since only the tenant knows its providers.
import { err, ok, type Result } from "../../domain/result.ts";
import type { Manifest, ManifestError } from "./schema.ts";

export function checkAuth(
  auth: Manifest["auth"],
  templates: Array<{ headers: Record<string, string> }>,
): Result<{ provider: string; scopes: string[] } | null, ManifestError> {
  const uses = templates.some((t) =>
    Object.values(t.headers).some((v) => v.includes("{credential}")),
  );
  if (uses && !auth)
    return err({
      code: "invalid_manifest",
      detail: 'a header uses {credential} but the tool has no auth: { oauth: "<provider>" }',
    });
  if (auth && !uses)
    return err({
      code: "invalid_manifest",
      detail: "auth: no header sends {credential} (e.g. Authorization: Bearer {credential})",
    });
  return ok(auth ? { provider: auth.oauth, scopes: auth.scopes } : null);
}
