// Which offered tools' idempotency is verified, for exactly the settings a run snapshotted: asked
// of the tenant when an operation is created and when a run exports its tools. Only manifest
// writes with mode "header" have a verdict (code tools are the deployment's own, reviewed with it);
// a manifest write with mode "natural" promises safe repeats that verify cannot check, so it is
// always "unverified". A tenant that cannot be asked counts as "unverified": under the policy
// that fails closed.
import type { VerificationStatus } from "../domain/verification.ts";
import type { Env } from "../env.ts";
import { LruCache } from "../lru.ts";
import { Manifest } from "../tools/manifest/schema.ts";
import type { ToolSource } from "../tools/spec.ts";
import { verificationSettingsHash } from "../tools/verify.ts";
import { tenantStub } from "./stubs.ts";

export async function verificationStatuses(
  env: Env,
  tenantId: string,
  tools: ReadonlyArray<[name: string, source: ToolSource]>,
): Promise<Record<string, VerificationStatus>> {
  const items: Array<{ name: string; settingsHash: string }> = [];
  const unverifiable: Record<string, VerificationStatus> = {};
  for (const [name, source] of tools) {
    if (source.kind !== "manifest") continue;
    const settings = await verifiableSettings(source.manifest);
    if (settings === NATURAL) unverifiable[name] = "unverified";
    else if (settings) items.push({ name, settingsHash: settings });
  }
  if (items.length === 0) return unverifiable;
  try {
    return { ...(await tenantStub(env, tenantId).verificationStatuses(items)), ...unverifiable };
  } catch (error) {
    console.error("verification statuses unavailable", tenantId, String(error));
    return {
      ...Object.fromEntries(items.map(({ name }) => [name, "unverified" as const])),
      ...unverifiable,
    };
  }
}

/** A write with mode "natural": nothing to verify, nothing verified. */
const NATURAL = "natural";

/** Per isolate, by the manifest's text: the settings hash of a verifiable tool, NATURAL, or null for any other. */
const settingsHashes = new LruCache<string, { hash: string | null; keyBytes: number }>(
  { maxEntries: 512, maxBytes: 8 << 20 },
  (entry) => entry.keyBytes + 100,
);

/** A new operation asked this with two zod parses and a hash each time; a manifest never changes. */
async function verifiableSettings(manifest: unknown): Promise<string | null> {
  const key = JSON.stringify(manifest);
  const cached = settingsHashes.get(key);
  if (cached) return cached.hash;
  const parsed = Manifest.safeParse(manifest);
  const write = parsed.success && parsed.data.risk !== "read" ? parsed.data : null;
  const hash =
    write?.idempotency.mode === "header"
      ? await verificationSettingsHash(manifest)
      : write?.idempotency.mode === "natural"
        ? NATURAL
        : null;
  settingsHashes.set(key, { hash, keyBytes: key.length });
  return hash;
}
