// What an operation's view shows of the call itself (issue 33): its frozen arguments, its target and
// the result the model got, each redacted by the tool's `redact` pointers as every other copy is
// (the trace, the inbox, the console). The real values stay in the frozen input and the envelope.
import { presentPointers, redactDocument, scrub } from "../../domain/redact.ts";
import type { Head } from "./contracts.ts";
import type { OperationLog } from "./log.ts";
import { decodeInput } from "../store/operation-rows.ts";

export type RedactedCall = {
  /** The frozen (bound, normalized) arguments, hidden paths as "[redacted]". */
  arguments: unknown;
  /** Where the tool sends it (method and URL), described from the redacted arguments. */
  target: string;
  /** The result the model got when it succeeded (null otherwise), redacted the same way. */
  result: unknown;
  /** The tool's pointers that hide something in these arguments. */
  hidden: string[];
};

export function redactedCallOf(log: OperationLog, { frozen, state }: Head): RedactedCall {
  const redaction = log.redaction(frozen);
  const input = decodeInput(frozen.input);
  const shown = redactDocument(input, redaction);
  const loaded = log.loadFixed();
  let target = "(the tool no longer compiles)";
  if (loaded.ok)
    try {
      target = scrub(loaded.value.spec.describeTarget(shown as Record<string, unknown>), redaction);
    } catch {
      target = "(the target could not be described)";
    }
  const outcome = state.phase === "recorded" ? state.outcome : null;
  return {
    arguments: shown,
    target,
    result:
      outcome?.status === "succeeded" ? redactDocument(outcome.result ?? null, redaction) : null,
    hidden: presentPointers(frozen.redact ?? [], input),
  };
}
