// What a RunObject owns and hands to the modules beside it: its environment, its SQL store, its
// rows and tool sources, the settler (recorded replies and reports) and the compiled offered
// tools. Plain references, no behaviour: each module takes the parts it uses.
import type { Env } from "../env.ts";
import type { SqlStore } from "../store/sql-store.ts";
import type { RunEvents } from "./events.ts";
import type { OfferedTools } from "./offered.ts";
import type { RunRows } from "./rows.ts";
import type { TurnSettler } from "./settle.ts";
import type { ToolSources } from "./sources.ts";

export type RunParts = {
  env: Env;
  store: SqlStore;
  rows: RunRows;
  sources: ToolSources;
  settler: TurnSettler;
  offered: OfferedTools;
  events: RunEvents;
};
