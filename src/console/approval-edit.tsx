// Edit on approve from the console (issue 35 item 2): a pending card's "Edit and approve" form —
// the frozen arguments as editable JSON, the fields an approver cannot change shown read-only, a
// required reason — posted to `${HOME}/<operation>/edit` and sent to the operation's `edit`, the
// same RPC as `POST /v1/operations/{id}/approve` with `arguments`. The operation decides: a
// refusal (a fixed field changed, invalid arguments, a stale version, four eyes) changes nothing
// and becomes the flash. "Preview the difference" submits the same form to re-render the inbox with
// this card's form filled in and the difference listed (`EditDraft`, no script); a passkey
// step-up tool's card gets the form too: the edit is written, then approved with the passkey.
// Also the card's edit difference and a routed approval's votes.
import type { Context } from "hono";
import type { Decided, OperationError } from "../durable/operation/contracts.ts";
import type { ApprovalInput } from "../durable/operation/contracts.ts";
import { operationStub } from "../durable/stubs.ts";
import type { Result } from "../domain/result.ts";
import { editedCall } from "../domain/turn/edit.ts";
import type { EditedCall } from "../domain/public-shapes.ts";
import type { Decider } from "../http/auth.ts";
import { toApiError } from "../http/problem.ts";
import { OPERATION_ID } from "../http/request.ts";
import { decisionFlash, HOME, MAX_REASON, type Item } from "./approval-decision.ts";
import { Fact } from "./facts.tsx";
import { setFlash, type Flash } from "./flash.ts";
import { pretty } from "./format.ts";
import type { ConsoleEnv } from "./page.ts";

/** The arguments text a form may carry (the API's body cap is 256 KiB). */
const MAX_ARGUMENTS = 200_000;

const shown = (value: unknown) => (value === undefined ? "(absent)" : JSON.stringify(value));

/** `amount: 100 → 40; note: (absent) → "x"`: each changed field, proposed then edited. */
export const changesText = (changes: NonNullable<ApprovalInput["edited"]>["changes"]) =>
  changes.map((c) => `${c.field}: ${shown(c.proposed)} → ${shown(c.executed)}`).join("; ");

/**
 * A previewed edit (the form as posted with "Preview the difference"): its text and reason kept,
 * and either each field it changes (`EditedCall` changes, as the model would be told) or why it
 * cannot be run as typed (not a JSON object, a fixed field changed).
 */
export type EditDraft = {
  text: string;
  reason: string;
  changes: EditedCall["changes"] | null;
  problem: string | null;
};

/** The form; the textarea holds the arguments minus the fixed fields, which the form carries as they are. */
export const EditForm = ({
  item,
  exact,
  csrf,
  draft,
}: {
  item: Item;
  exact: ApprovalInput;
  csrf: string;
  draft?: EditDraft | undefined;
}) => {
  const id = item.operation_id;
  const fixed = Object.fromEntries(exact.fixed.map((field) => [field, exact.arguments[field]]));
  const editable = Object.fromEntries(
    Object.entries(exact.arguments).filter(([field]) => !exact.fixed.includes(field)),
  );
  // A step-up tool's approval needs the passkey, made for the edited hash: the edit, then the card.
  const label = exact.step_up ? "Edit (then approve with your passkey)" : "Edit and approve";
  return (
    <details class="edit" data-role="edit-form" open={draft !== undefined}>
      <summary>{label}</summary>
      <form
        method="post"
        action={`${HOME}/${id}/edit`}
        class="stack"
        aria-label={`Edit and approve ${item.tool}`}
      >
        <input type="hidden" name="csrf" value={csrf} />
        <input type="hidden" name="input_hash" value={exact.input_hash} />
        <input type="hidden" name="policy_version" value={exact.policy_version} />
        <input type="hidden" name="approval_hash" value={exact.approval_hash} />
        <input type="hidden" name="fixed" value={JSON.stringify(fixed)} />
        <div>
          <label for={`${id}-edit-arguments`}>Arguments (JSON)</label>
          <p class="hint" id={`${id}-edit-hint`}>
            The whole arguments to run instead of the proposal. They are checked again (schema,
            limits, policies); the agent is told what ran and why.
          </p>
          <textarea
            id={`${id}-edit-arguments`}
            name="arguments"
            rows={6}
            class="mono"
            maxlength={MAX_ARGUMENTS}
            required
            aria-describedby={`${id}-edit-hint`}
          >
            {draft ? draft.text : pretty(editable)}
          </textarea>
        </div>
        {exact.fixed.length > 0 && (
          <div data-role="fixed-fields">
            <p class="hint">Not editable (bound from the run's context or naming the operation):</p>
            <pre>
              <code>{pretty(fixed)}</code>
            </pre>
          </div>
        )}
        <div>
          <label for={`${id}-edit-reason`}>Reason for the edit</label>
          <textarea id={`${id}-edit-reason`} name="reason" rows={2} maxlength={MAX_REASON} required>
            {draft?.reason ?? ""}
          </textarea>
        </div>
        {draft && <DraftDiff draft={draft} />}
        <div>
          <button type="submit" name="action" value="preview">
            Preview the difference
          </button>{" "}
          <button type="submit" name="action" value="edit" class="approve">
            {label}
          </button>
        </div>
      </form>
    </details>
  );
};

/** What the previewed edit changes, field by field, before anything is sent (or why it cannot run). */
const DraftDiff = ({ draft }: { draft: EditDraft }) => (
  <div data-role="edit-preview" class={draft.problem ? "alert" : "preview"}>
    {draft.problem ? (
      <p>Not as typed: {draft.problem}. Nothing was changed.</p>
    ) : draft.changes && draft.changes.length > 0 ? (
      <>
        <p>
          This edit changes (nothing is sent until you press {'"'}Edit{'"'}):
        </p>
        <table>
          <thead>
            <tr>
              <th scope="col">Field</th>
              <th scope="col">Proposed</th>
              <th scope="col">Edited</th>
            </tr>
          </thead>
          <tbody>
            {draft.changes.map((c) => (
              <tr data-field={c.field}>
                <td class="mono">{c.field}</td>
                <td class="mono">{shown(c.proposed)}</td>
                <td class="mono">{shown(c.executed)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </>
    ) : (
      <p>These arguments are the proposal unchanged: approving them is a plain approval.</p>
    )}
  </div>
);

/** A person's edit on the card (the version shown is the edited one): who, why, each change. */
export const EditedFact = ({ edited }: { edited: NonNullable<ApprovalInput["edited"]> }) => (
  <Fact label="Edited">
    <span data-role="edit-changes">
      by <span class="mono">{edited.by}</span>: {changesText(edited.changes)}
      {edited.reason && <> ({edited.reason})</>}
    </span>
  </Fact>
);

/** "Votes: 1 of 2 (bob); may still vote: finance (dave)" from a routed approval's `route`. */
export const VotesFact = ({ route }: { route: NonNullable<Item["route"]> }) => {
  const votes = route.votes.map((v) => (v.cast_by ? `${v.by} by ${v.cast_by}` : v.by));
  const may = route.may_vote.map((g) =>
    g.members.length > 0 ? `${g.group} (${g.members.join(", ")})` : g.group,
  );
  return (
    <Fact label="Quorum">
      <span data-role="route-votes">
        Votes: {route.votes.length} of {route.quorum}
        {votes.length > 0 && ` (${votes.join(", ")})`}
        {may.length > 0 && `; may still vote: ${may.join("; ")}`}
      </span>
    </Fact>
  );
};

/** The operation's answer to an edit, in words. */
export function editFlash(answer: Result<Decided, OperationError>): Flash {
  if (!answer.ok) {
    const { code, detail } = toApiError(answer.error);
    if (code === "field_not_editable" || code === "invalid_arguments" || code === "policy_denied")
      return { tone: "error", text: `Refused: ${detail} Nothing was changed or sent.` };
    // The edit was written; its approval needs a passkey made for the edited hash (the card's button).
    if (code === "step_up_required")
      return {
        tone: "ok",
        text: "Edited: nothing was sent. Approving the edited version needs your passkey: press Approve on its card.",
      };
    return decisionFlash(answer);
  }
  const { view, decided } = answer.value;
  const changes = view.edited ? changesText(view.edited.model.changes) : "";
  if (!decided && view.approval?.state === "pending")
    return {
      tone: "ok",
      text: `Edited ${view.tool} (${changes}). The edited version waits for another person's approval; nothing was sent.`,
    };
  const flash = decisionFlash(answer);
  return view.edited && decided ? { ...flash, text: `${flash.text} Edited: ${changes}.` } : flash;
}

/** A pending card's form as posted (approve, reject, edit): its common fields and a refusal (303 with the flash). */
export async function readCardForm(c: Context<ConsoleEnv>) {
  const form = await c.req.parseBody();
  const field = (name: string) => (typeof form[name] === "string" ? (form[name] as string) : "");
  return {
    operationId: c.req.param("operation_id") ?? "",
    field,
    reason: field("reason").trim(),
    inputHash: field("input_hash"),
    toolVersion: field("policy_version"),
    approvalHash: field("approval_hash"),
    refuse: async (text: string) => {
      await setFlash(c, { tone: "error", text });
      return c.redirect(HOME, 303);
    },
  };
}

/** Reads the edit form, asks the operation, and leaves its answer as the inbox flash (303). */
export async function editFromForm(
  c: Context<ConsoleEnv>,
  decider: () => Promise<Decider | Response>,
  showDraft: (operationId: string, draft: EditDraft) => Promise<Response>,
) {
  const { operationId, field, reason, inputHash, toolVersion, approvalHash, ...read } =
    await readCardForm(c);
  const refuse = (text: string) => read.refuse(`${text} Nothing was changed or sent.`);
  if (!OPERATION_ID.test(operationId))
    return refuse("There is no such approval request in this tenant.");
  if (!inputHash || !toolVersion)
    return refuse("This form did not say which version it edits. Reload the page and edit again.");
  if (field("action") === "preview") {
    const exact = await operationStub(c.env, operationId)
      .approvalInput(c.get("session").tenantId)
      .catch(() => null);
    if (!exact?.ok) return refuse("This request no longer waits for approval.");
    if (exact.value.input_hash !== inputHash)
      return refuse("The arguments changed since this card was shown. Reload and edit again.");
    return showDraft(operationId, draftOf(exact.value, field("arguments"), reason));
  }
  if (!reason) return refuse("An edit needs a reason (the agent is told it).");
  if (reason.length > MAX_REASON) return refuse(`A reason is at most ${MAX_REASON} characters.`);
  const edited = jsonObject(field("arguments"));
  const fixed = jsonObject(field("fixed") || "{}");
  if (typeof edited === "string") return refuse(`The arguments are not a JSON object: ${edited}.`);
  if (typeof fixed === "string") return refuse("The form's fixed fields were damaged. Reload.");
  const by = await decider();
  if (by instanceof Response) return by;
  // The fixed fields go as the card showed them; a value typed over one is sent, and refused by name.
  const answer = await operationStub(c.env, operationId).edit(
    c.get("session").tenantId,
    {
      verdict: "approve",
      approverId: by.id,
      via: by.via,
      scopes: by.scopes,
      ...(by.claims ? { claims: by.claims } : {}),
      reason,
      inputHash,
      toolVersion,
      ...(approvalHash ? { approvalHash } : {}),
    },
    { ...fixed, ...edited },
  );
  await setFlash(c, editFlash(answer));
  return c.redirect(HOME, 303);
}

/** The previewed edit against the version shown: what `edit` would change, computed as the model is told. */
function draftOf(exact: ApprovalInput, text: string, reason: string): EditDraft {
  const edited = jsonObject(text);
  const draft = { text, reason, changes: null, problem: null };
  if (typeof edited === "string") return { ...draft, problem: `not a JSON object (${edited})` };
  const touched = exact.fixed.find(
    (f) => f in edited && JSON.stringify(edited[f]) !== JSON.stringify(exact.arguments[f]),
  );
  if (touched)
    return { ...draft, problem: `${touched} cannot be changed (bound or naming the operation)` };
  const fixed = Object.fromEntries(exact.fixed.map((f) => [f, exact.arguments[f]]));
  const { changes } = editedCall(exact.arguments, { ...fixed, ...edited }, [], reason || null);
  return { ...draft, changes };
}

/** The text as a JSON object, or why it is not one. */
function jsonObject(text: string): Record<string, unknown> | string {
  if (text.length > MAX_ARGUMENTS) return `longer than ${MAX_ARGUMENTS} characters`;
  try {
    const value: unknown = JSON.parse(text);
    if (value && typeof value === "object" && !Array.isArray(value))
      return value as Record<string, unknown>;
    return "it is valid JSON but not an object";
  } catch (error) {
    return error instanceof Error ? error.message : "it does not parse";
  }
}
