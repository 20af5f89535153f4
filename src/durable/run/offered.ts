// The run's offered tools compiled, keyed by the content hash of their sources (never by names),
// so a re-registered tool is never a stale hit. One per object; cleared when retention prunes.
import type { RunState } from "../../domain/turn/turn.ts";
import { hostPolicy } from "../../config.ts";
import type { Env } from "../env.ts";
import { resolveTool } from "../../tools/catalog.ts";
import type { ToolSpec } from "../../tools/spec.ts";

export class OfferedTools {
  private offered: { toolsHash: string; tools: Map<string, ToolSpec> } | null = null;

  constructor(private readonly env: Env) {}

  /** Compiled offered tools, keyed by the content hash of their sources (never by names). */
  of(run: RunState): Map<string, ToolSpec> {
    if (this.offered?.toolsHash === run.toolsHash) return this.offered.tools;
    const tools = new Map<string, ToolSpec>();
    for (const [name, source] of Object.entries(run.tools)) {
      const spec = resolveTool(source, hostPolicy(this.env));
      if (spec.ok) tools.set(name, spec.value);
    }
    this.offered = { toolsHash: run.toolsHash, tools };
    return tools;
  }

  clear(): void {
    this.offered = null;
  }
}
