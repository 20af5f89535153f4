// What an operation's view says about a shadow run (issue 22): that it was one, and the production
// request it would have sent (frozen in its plan at the start; secrets named, never valued), with
// the tool's hidden arguments scrubbed like every other copy the API and console show.
import type { WouldSend } from "../../domain/operation/state.ts";
import { scrub } from "../../domain/redact.ts";
import type { Head } from "./contracts.ts";
import type { OperationLog } from "./log.ts";

export type ShadowView = { shadow: boolean; would_have_sent: WouldSend | null };

export function shadowViewOf(log: OperationLog, { frozen }: Head): ShadowView {
  const shadow = frozen.plan.shadow;
  if (!shadow) return { shadow: false, would_have_sent: null };
  return { shadow: true, would_have_sent: scrub(shadow.would_send, log.redaction(frozen)) };
}
