// Edit on approve from the console (issue 35 item 2): a pending card's "Edit and approve" form —
// the frozen arguments as editable JSON, the fields an approver cannot change shown read-only, a
// required reason — posted to `${HOME}/<operation>/edit` and sent to the operation's `edit`, the
// same RPC as `POST /v1/operations/{id}/approve` with `arguments`. The operation decides: a
// refusal (a fixed field changed, invalid arguments, a stale version, four eyes) changes nothing
// and becomes the flash. Also the card's edit difference and a routed approval's votes.
import type { Context } from "hono";
import type { Decided, OperationError } from "../durable/operation/contracts.ts";
import type { ApprovalInput } from "../durable/operation/contracts.ts";
import { operationStub } from "../durable/stubs.ts";
import type { Result } from "../domain/result.ts";
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

/** The form; the textarea holds the arguments minus the fixed fields, which the form carries as they are. */
export const EditForm = ({
  item,
  exact,
  csrf,
}: {
  item: Item;
  exact: ApprovalInput;
  csrf: string;
}) => {
  const id = item.operation_id;
  const fixed = Object.fromEntries(exact.fixed.map((field) => [field, exact.arguments[field]]));
  const editable = Object.fromEntries(
    Object.entries(exact.arguments).filter(([field]) => !exact.fixed.includes(field)),
  );
  return (
    <details class="edit" data-role="edit-form">
      <summary>Edit and approve</summary>
      <form
        method="post"
        action={`${HOME}/${id}/edit`}
        class="stack"
        aria-label={`Edit and approve ${item.tool}`}
      >
        <input type="hidden" name="csrf" value={csrf} />
        <input type="hidden" name="input_hash" value={exact.input_hash} />
        <input type="hidden" name="policy_version" value={exact.policy_version} />
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
            {pretty(editable)}
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
          <textarea
            id={`${id}-edit-reason`}
            name="reason"
            rows={2}
            maxlength={MAX_REASON}
            required
          ></textarea>
        </div>
        <div>
          <button type="submit" class="approve">
            Edit and approve
          </button>
        </div>
      </form>
    </details>
  );
};

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
) {
  const { operationId, field, reason, inputHash, toolVersion, ...read } = await readCardForm(c);
  const refuse = (text: string) => read.refuse(`${text} Nothing was changed or sent.`);
  if (!OPERATION_ID.test(operationId))
    return refuse("There is no such approval request in this tenant.");
  if (!inputHash || !toolVersion)
    return refuse("This form did not say which version it edits. Reload the page and edit again.");
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
    },
    { ...fixed, ...edited },
  );
  await setFlash(c, editFlash(answer));
  return c.redirect(HOME, 303);
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
