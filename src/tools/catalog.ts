// Resolves a ToolSource (as stored with a run or an operation) to a compiled ToolSpec. Code tools
// come from CODE_TOOLS; manifests are compiled once per isolate (a cache of derived data only).
import { err, ok, type Result } from "../domain/result.ts";
import { compileManifest, type HostPolicy, type ManifestError } from "./manifest.ts";
import type { ToolSource, ToolSpec } from "./spec.ts";
import { CODE_TOOLS } from "./code-tools.ts";

const compiled = new Map<string, ToolSpec>();

export function resolveTool(source: ToolSource, hosts: HostPolicy): Result<ToolSpec, ManifestError> {
  if (source.kind === "code") {
    const spec = CODE_TOOLS[source.name];
    return spec ? ok(spec) : err({ code: "invalid_manifest", detail: `no code tool named ${source.name}` });
  }
  const key = JSON.stringify(source.manifest);
  const cached = compiled.get(key);
  if (cached) return ok(cached);
  const result = compileManifest(source.manifest, hosts);
  if (result.ok) compiled.set(key, result.value);
  return result;
}
