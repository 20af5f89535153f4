// Edit-on-approve (issue 35 item 2), the run's side, pure: a person's edited arguments for a call
// awaiting approval pass the turn's own gate again (`gateTurn`: offered tool, scopes, schema,
// per-call limits, claims of limits across runs) under the run's context and scopes of the moment.
// Bound fields (manifest `bind`, from the run's context) and the tool's operation-key fields are not
// the approver's to change: sending one with another value is refused by name (a bound field sent
// with its own value is accepted and dropped: the gate fills it in). Also what the model is told
// afterwards: the executed arguments (bound fields left out, as the model never sees them) and the
// difference from what it proposed, decided once at the edit and stored, so a re-post reads the
// same words.
import { canonicalJson } from "../canonical-json.ts";
import type { LimitClaim } from "../limit/window.ts";
import type { EditedCall } from "../public-shapes.ts";
import { err, ok, type Result } from "../result.ts";
import type { ToolSpec } from "../../tools/spec.ts";
import { gateTurn } from "./admit.ts";
import type { GateRefusal } from "./gate.ts";
import type { RunState } from "./turn.ts";

export type EditRefusal =
  | GateRefusal
  /** A bound field or an operation-key field sent with another value than the call holds. */
  | { code: "field_not_editable"; field: string; message: string };

const same = (a: unknown, b: unknown) => canonicalJson(a ?? null) === canonicalJson(b ?? null);

/**
 * `current`: the call's frozen input now (bound fields included); `edited`: the approver's
 * arguments. The admitted input (bound fields filled in from the run's context) and its claims.
 */
export function admitEdit(
  run: RunState,
  offered: ReadonlyMap<string, ToolSpec>,
  tool: string,
  current: Record<string, unknown>,
  edited: Record<string, unknown>,
): Result<{ input: Record<string, unknown>; claims: LimitClaim[] }, EditRefusal> {
  const spec = offered.get(tool);
  const args = { ...edited };
  for (const field of Object.keys(spec?.bind ?? {})) {
    if (!Object.hasOwn(args, field)) continue;
    if (!same(args[field], current[field]))
      return err({
        code: "field_not_editable",
        field,
        message: `${field} is bound from the run's context (${spec!.bind[field]}); an approver cannot change it. Nothing was changed.`,
      });
    delete args[field];
  }
  // The operation's identity (and so its idempotency key) is these fields: another value is another operation.
  for (const field of spec?.operationKey ?? [])
    if (!same(args[field], current[field]))
      return err({
        code: "field_not_editable",
        field,
        message: `${field} names which operation this is (the tool's operation key); changing it would be another operation. Reject this call instead. Nothing was changed.`,
      });
  const [verdict] = gateTurn(run, offered, [{ id: "edit", name: tool, arguments: args }]);
  if ("refused" in verdict!) return err(verdict.refused);
  return ok({ input: verdict!.input, claims: verdict!.claims });
}

/**
 * What the model reads about an edit: the arguments that ran (bound fields left out), each field
 * that differs from its proposal (`proposed`/`executed` absent: the field was not there), and the
 * approver's reason verbatim.
 */
export function editedCall(
  proposed: Record<string, unknown>,
  executed: Record<string, unknown>,
  bound: readonly string[],
  reason: string | null,
): EditedCall {
  const shown = (input: Record<string, unknown>) =>
    Object.fromEntries(Object.entries(input).filter(([field]) => !bound.includes(field)));
  const [before, after] = [shown(proposed), shown(executed)];
  const fields = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort();
  const changes = fields
    .filter((field) => !same(before[field], after[field]) || field in before !== field in after)
    .map((field) => ({
      field,
      ...(field in before ? { proposed: before[field] } : {}),
      ...(field in after ? { executed: after[field] } : {}),
    }));
  const listed = changes
    .map((c) => `${c.field}: ${words(c.proposed)} → ${words(c.executed)}`)
    .join("; ");
  const why = reason ? ` Their reason: "${reason}".` : "";
  return {
    arguments: after,
    changes,
    reason,
    note: `A person changed the arguments you proposed before approving (${listed}).${why} The call runs with the arguments in edited.arguments, not yours; tell the user what actually ran.`,
  };
}

const words = (value: unknown) => (value === undefined ? "(absent)" : JSON.stringify(value));
