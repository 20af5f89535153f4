// What a RunObject owns and hands to the modules beside it: its environment, its SQL store, its
// rows and tool sources, and the settler (recorded replies and reports). Plain references, no behaviour: each module takes the parts it uses.
import type { Env } from "../env.ts";
import type { SqlStore } from "../store/sql-store.ts";
import type { RunEvents } from "./events.ts";
import type { RunRows } from "./rows.ts";
import type { TurnSettler } from "./settle.ts";
import type { ToolSources } from "./sources.ts";

export type RunParts = {
  env: Env;
  store: SqlStore;
  rows: RunRows;
  sources: ToolSources;
  settler: TurnSettler;
  events: RunEvents;
};
