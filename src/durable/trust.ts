// Which offered tools' idempotency is verified, for exactly the settings a run snapshotted: asked
// of the tenant when an operation is created and when a run exports its tools. Only manifest
// writes with mode "header" have a verdict (code tools are the deployment's own, reviewed with it).
// A tenant that cannot be asked counts as "unverified": under the policy that fails closed.
import type { VerificationStatus } from "../domain/verification.ts";
import type { Env } from "../env.ts";
import { LruCache } from "../lru.ts";
import { Manifest } from "../tools/manifest.ts";
import type { ToolSource } from "../tools/spec.ts";
import { verificationSettingsHash } from "../tools/verify.ts";
import { tenantStub } from "./stubs.ts";

export async function verificationStatuses(
  env: Env,
  tenantId: string,
  tools: ReadonlyArray<[name: string, source: ToolSource]>,
): Promise<Record<string, VerificationStatus>> {
  const items: Array<{ name: string; settingsHash: string }> = [];
  for (const [name, source] of tools) {
    if (source.kind !== "manifest") continue;
    const settingsHash = await verifiableSettings(source.manifest);
    if (settingsHash) items.push({ name, settingsHash });
  }
  if (items.length === 0) return {};
  try {
    return await tenantStub(env, tenantId).verificationStatuses(items);
  } catch (error) {
    console.error("verification statuses unavailable", tenantId, String(error));
    return Object.fromEntries(items.map(({ name }) => [name, "unverified" as const]));
  }
}

/** Per isolate, by the manifest's text: the settings hash of a verifiable tool, null for any other. */
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
  const hash =
    parsed.success && parsed.data.risk !== "read" && parsed.data.idempotency.mode === "header"
      ? await verificationSettingsHash(manifest)
      : null;
  settingsHashes.set(key, { hash, keyBytes: key.length });
  return hash;
}
