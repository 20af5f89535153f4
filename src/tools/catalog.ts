// The one home of a tool as the engine runs it: a ToolSource (as stored with a tenant, a run or an
// operation) compiled to a CompiledTool, and its version, the hash of its canonical source. Code
// tools come from CODE_TOOLS; manifests are compiled once per isolate, keyed by the manifest's
// content (a re-registered tool is a new entry, never a stale hit), in an LRU bounded by count: a
// tenant registering many tools cannot grow an isolate's memory without limit. No other module
// keeps a compiled tool or a version: they ask here (the lookups by object identity are cheap).
import { canonicalJson, sha256Hex } from "../domain/canonical-json.ts";
import { err, ok, type Result } from "../domain/result.ts";
import { LruCache } from "../lru.ts";
import { compileManifest } from "./manifest/compile.ts";
import type { HostPolicy, ManifestError } from "./manifest/schema.ts";
import type { ToolSource, ToolSpec } from "./spec.ts";
import { CODE_TOOLS } from "./code-tools.ts";

/** A tool compiled from its source under a deployment's host policy: what an attempt runs. */
export type CompiledTool = ToolSpec;

export const COMPILED_TOOLS_MAX = 128;
// Bounded by count (a manifest body is capped at 256 KiB, so count bounds bytes too).
const compiled = new LruCache<string, CompiledTool>(
  { maxEntries: COMPILED_TOOLS_MAX, maxBytes: Number.POSITIVE_INFINITY },
  () => 0,
);
/**
 * The same source objects come back on every turn (decoded rows are cached and deep-frozen), so a
 * hit by identity spares stringifying the manifest; only frozen objects, which cannot change under
 * the entry. The content-keyed LRU above stays the bound.
 */
const byObject = new WeakMap<object, { hosts: string; tool: CompiledTool }>();
/** A run's offered tools, by the identity of its (frozen, cached) `tools` record. */
const offeredByObject = new WeakMap<object, { hosts: string; tools: Map<string, CompiledTool> }>();
/** Each source object's version (content-addressed, so never stale). */
const versions = new WeakMap<ToolSource, string>();

const hostsKey = (hosts: HostPolicy) => JSON.stringify([hosts.allowlist, hosts.allowLoopback]);

export function compileTool(
  source: ToolSource,
  hosts: HostPolicy,
): Result<CompiledTool, ManifestError> {
  if (source.kind === "code") {
    const spec = CODE_TOOLS[source.name];
    return spec
      ? ok(spec)
      : err({ code: "invalid_manifest", detail: `no code tool named ${source.name}` });
  }
  // The host policy is part of the key: the same manifest may compile under one policy only.
  const policy = hostsKey(hosts);
  const manifest = source.manifest;
  const frozen = typeof manifest === "object" && manifest !== null && Object.isFrozen(manifest);
  const known = frozen ? byObject.get(manifest) : undefined;
  if (known?.hosts === policy) return ok(known.tool);
  const key = JSON.stringify([hosts.allowlist, hosts.allowLoopback, manifest]);
  const cached = compiled.get(key);
  const result = cached ? ok(cached) : compileManifest(manifest, hosts);
  if (!result.ok) return result;
  if (!cached) compiled.set(key, result.value);
  if (frozen) byObject.set(manifest, { hosts: policy, tool: result.value });
  return result;
}

/** A manifest as a tenant registers it (PUT), compiled like any stored source. */
export const compileManifestTool = (manifest: unknown, hosts: HostPolicy) =>
  compileTool({ kind: "manifest", manifest }, hosts);

/** A run's offered tools that compile under `hosts`, by name (one that does not is not offered). */
export function compileTools(
  tools: Readonly<Record<string, ToolSource>>,
  hosts: HostPolicy,
): ReadonlyMap<string, CompiledTool> {
  const policy = hostsKey(hosts);
  const known = Object.isFrozen(tools) ? offeredByObject.get(tools) : undefined;
  if (known?.hosts === policy) return known.tools;
  const compiledTools = new Map<string, CompiledTool>();
  for (const [name, source] of Object.entries(tools)) {
    const tool = compileTool(source, hosts);
    if (tool.ok) compiledTools.set(name, tool.value);
  }
  if (Object.isFrozen(tools)) offeredByObject.set(tools, { hosts: policy, tools: compiledTools });
  return compiledTools;
}

/**
 * The tool's version: the hash of its canonical source. What an approval binds to (the approver
 * saw this very tool), and the key a run stores each source under (`tool_sources`). Not Cedar's
 * policy set version (`PolicySet.version`, the hash of the policy text).
 */
export async function toolVersion(source: ToolSource): Promise<string> {
  const known = versions.get(source);
  if (known !== undefined) return known;
  const version = await sha256Hex(canonicalJson(source));
  versions.set(source, version);
  return version;
}

/** The version already computed for this source object (`toolVersion`), if any. */
export const knownToolVersion = (source: ToolSource): string | undefined => versions.get(source);

/** A source decoded from where it is stored under its version (content-addressed: it is its hash). */
export function storedUnderVersion(source: ToolSource, version: string): void {
  versions.set(source, version);
}
