// Resolves a ToolSource (as stored with a run or an operation) to a compiled ToolSpec. Code tools
// come from CODE_TOOLS; manifests are compiled once per isolate, keyed by the manifest's content
// (so a re-registered tool is a new entry, never a stale hit), in an LRU bounded by count: a
// tenant registering many tools cannot grow an isolate's memory without limit.
import { err, ok, type Result } from "../domain/result.ts";
import { LruCache } from "../lru.ts";
import { compileManifest } from "./manifest/compile.ts";
import type { HostPolicy, ManifestError } from "./manifest/schema.ts";
import type { ToolSource, ToolSpec } from "./spec.ts";
import { CODE_TOOLS } from "./code-tools.ts";

export const COMPILED_TOOLS_MAX = 128;
// Bounded by count (a manifest body is capped at 256 KiB, so count bounds bytes too).
const compiled = new LruCache<string, ToolSpec>(
  { maxEntries: COMPILED_TOOLS_MAX, maxBytes: Number.POSITIVE_INFINITY },
  () => 0,
);

export function resolveTool(
  source: ToolSource,
  hosts: HostPolicy,
): Result<ToolSpec, ManifestError> {
  if (source.kind === "code") {
    const spec = CODE_TOOLS[source.name];
    return spec
      ? ok(spec)
      : err({ code: "invalid_manifest", detail: `no code tool named ${source.name}` });
  }
  // The host policy is part of the key: the same manifest may compile under one policy only.
  const key = JSON.stringify([hosts.allowlist, hosts.allowLoopback, source.manifest]);
  const cached = compiled.get(key);
  if (cached) return ok(cached);
  const result = compileManifest(source.manifest, hosts);
  if (result.ok) compiled.set(key, result.value);
  return result;
}
