// Batch selection on the approvals inbox (issue 35): each pending card the approver can see exactly
// has a checkbox (owned by the one batch form through `form="batch"`, since forms cannot nest)
// whose value binds the operation to the input hash, tool version and approval hash the card showed; the form
// carries the verdict, one reason and the session's CSRF token. The handler hands the ticked items
// to http/approvals-batch.ts — the API's own path, each decided as if alone — and flashes each result.
import type { Context } from "hono";
import { decideBatch, type BatchItemResult } from "../http/approvals-batch.ts";
import { ApprovalBatch, MAX_BATCH_DECISIONS } from "../http/schemas.ts";
import { HOME, MAX_REASON, type Item } from "./approval-decision.ts";
import type { Decider } from "../http/auth.ts";
import { setFlash, type Flash } from "./flash.ts";
import type { ConsoleEnv } from "./page.ts";

const FORM_ID = "batch";
/** A checkbox's value: operation, input hash, tool version and approval hash, as the card showed them. */
const SEPARATOR = "~";

/** The checkbox on one card: only for a card showing the exact arguments, before it expires. */
export const BatchSelect = ({ item }: { item: Item }) => (
  <label class="batch-select">
    <input
      type="checkbox"
      form={FORM_ID}
      name="item"
      value={[item.operation_id, item.input_hash, item.policy_version, item.approval_hash].join(
        SEPARATOR,
      )}
    />{" "}
    Select for a batch decision
  </label>
);

export const BatchForm = ({ csrf }: { csrf: string }) => (
  <form
    method="post"
    action={`${HOME}/batch`}
    id={FORM_ID}
    class="stack batch"
    aria-label="Decide the selected requests"
  >
    <input type="hidden" name="csrf" value={csrf} />
    <p class="hint">
      Tick requests below, then decide them together: each is decided as if alone, with the
      arguments and tool version its card shows (one that changed, expired or was decided meanwhile
      is skipped and named).
    </p>
    <div>
      <label for="batch-reason">Reason</label>
      <p class="hint" id="batch-reason-hint">
        Required to reject (the agent is told it, word for word); optional to approve.
      </p>
      <textarea
        id="batch-reason"
        name="reason"
        rows={2}
        maxlength={MAX_REASON}
        aria-describedby="batch-reason-hint"
      ></textarea>
    </div>
    <div>
      <button type="submit" name="decision" value="approve" class="approve">
        Approve selected
      </button>{" "}
      <button type="submit" name="decision" value="reject" class="reject">
        Reject selected
      </button>
    </div>
  </form>
);

/**
 * POST /console/approvals/batch (approvals.tsx checks the scope): the ticked items through the API's
 * schema, then `decider` (who is deciding, verified only once the form is understood), then decided
 * as the API does.
 */
export async function decideBatchFromForm(
  c: Context<ConsoleEnv>,
  decider: () => Promise<Decider | Response>,
) {
  const form = await c.req.parseBody({ all: true });
  const ticked = ([] as unknown[]).concat(form.item ?? []);
  const reason = typeof form.reason === "string" ? form.reason.trim() : "";
  const refuse = async (text: string) => {
    await setFlash(c, { tone: "error", text });
    return c.redirect(HOME, 303);
  };
  if (ticked.length === 0) return refuse("No request was selected, so nothing was decided.");
  if (ticked.length > MAX_BATCH_DECISIONS)
    return refuse(`At most ${MAX_BATCH_DECISIONS} requests at once. Nothing was decided.`);
  const items = ApprovalBatch.safeParse(
    ticked.map((value) => {
      const [operation_id, input_hash, policy_version, approval_hash] =
        String(value).split(SEPARATOR);
      return {
        operation_id,
        input_hash,
        policy_version,
        // A page shown before approval hashes: bound to the arguments (a payment's is then refused).
        ...(approval_hash ? { approval_hash } : {}),
        decision: form.decision,
        ...(reason ? { reason } : {}),
      };
    }),
  );
  if (!items.success)
    return refuse(
      form.decision === "reject" && !reason
        ? "Rejecting needs a reason (the agent is told it). Nothing was decided."
        : "This form was not understood (reload the page and select again). Nothing was decided.",
    );
  const by = await decider();
  if (by instanceof Response) return by;
  const results = await decideBatch(c.env, c.get("session").tenantId, by, items.data);
  await setFlash(c, batchFlash(results));
  return c.redirect(HOME, 303);
}

/** How many skipped items the flash names (it is a cookie: it stays small); the rest are counted. */
const FLASH_SKIPPED = 8;

/** The count decided, then each skipped item and why. */
function batchFlash(results: BatchItemResult[]): Flash {
  const skipped = results.flatMap((r) =>
    r.result === "skipped" ? [`${r.operation_id} skipped (${r.reason}): ${r.detail}`] : [],
  );
  const named = skipped.slice(0, FLASH_SKIPPED);
  const more = skipped.length - named.length;
  const voted = results.filter((r) => r.result === "voted").length;
  return {
    tone: skipped.length === 0 ? "ok" : "error",
    text: [
      `Decided ${results.length - skipped.length - voted} of ${results.length}.`,
      ...(voted > 0 ? [`${voted} counted as a vote; more approvers must vote.`] : []),
      ...named.map((line) => `${line}.`),
      ...(more > 0 ? [`${more} more skipped.`] : []),
    ].join(" "),
  };
}
