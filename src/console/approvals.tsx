// /console/approvals: the tenant's approvals inbox (TenantObject.listApprovals), newest first, with
// cursor pages; a "decided" tab shows how each request ended. Each pending request shows what will
// run — tool, frozen arguments and target read from the operation itself (the inbox copy is
// redacted like the trace; fields the tool hides are named), preview — and its forms carry
// the input_hash and policy_version of what was shown, so a decision can never apply to other
// arguments or another tool version (the operation refuses a mismatch). The approver is the person
// Cloudflare Access verified, else the signed-in key's name; four eyes is the operation's check.
// Cards can be ticked and decided together (approval-batch.tsx). Needs approvals:decide. Below
// them, the calls waiting for a user to connect (credential-waits.tsx).
import type { Context } from "hono";
import type { ApprovalInput } from "../durable/operation/contracts.ts";
import { operationStub, tenantStub } from "../durable/stubs.ts";
import type { ApprovalPage } from "../durable/tenant/inbox.ts";
import { ACCESS_HEADER, accessIdentity } from "../http/access.ts";
import type { Decider } from "../http/auth.ts";
import { ApiProblem, statusOf } from "../http/problem.ts";
import { OPERATION_ID } from "../http/request.ts";
import { verifyStepUp } from "../http/passkey.ts";
import { ApprovalsQuery, PasskeyAssertion } from "../http/schemas.ts";
import { PendingCard } from "./approval-card.tsx";
import { decisionFlash, HOME, MAX_REASON, type Item } from "./approval-decision.ts";
import { BatchForm, decideBatchFromForm } from "./approval-batch.tsx";
import { editFromForm, readCardForm, type EditDraft } from "./approval-edit.tsx";
import { CredentialWaits, credentialWaits } from "./credential-waits.tsx";
import { DecidedTable } from "./decided-table.tsx";
import { setFlash, takeFlash } from "./flash.ts";
import { FlashBox, problemPage, render } from "./layout.tsx";
import { consoleRoutes, definePage, type ConsoleEnv } from "./page.ts";

const PAGE_SIZE = 20;

function allowed(c: Context<ConsoleEnv>) {
  return c.get("session").scopes.includes("approvals:decide");
}
const notAllowed = (c: Context<ConsoleEnv>) =>
  problemPage(
    c,
    403,
    "Not allowed",
    "Deciding approvals needs an API key with the scope approvals:decide. Nothing was shown or decided.",
  );

async function showInbox(
  c: Context<ConsoleEnv>,
  draft?: { operationId: string; draft: EditDraft },
) {
  if (!allowed(c)) return notAllowed(c);
  const query = ApprovalsQuery.safeParse({ ...c.req.query(), limit: String(PAGE_SIZE) });
  if (!query.success)
    return problemPage(
      c,
      400,
      "Bad page address",
      "This approvals page address is not valid (state is pending or decided; the cursor comes from an Older link).",
      { href: HOME, label: "Pending approvals" },
    );
  const { state, cursor } = query.data;
  const session = c.get("session");
  const [page, flash] = await Promise.all([
    tenantStub(c.env, session.tenantId).listApprovals(state, cursor ?? null, PAGE_SIZE),
    takeFlash(c),
  ]);
  const pending = state === "pending";
  const [exact, notified, waits] = await Promise.all([
    pending ? exactInputs(c, page.items) : new Map<string, ApprovalInput>(),
    pending
      ? tenantStub(c.env, session.tenantId)
          .notificationStates(page.items.map((item) => item.operation_id))
          .catch(() => null)
      : null,
    // Calls waiting for their user to connect (issue 36): on the first pending page only.
    pending && !cursor ? credentialWaits(c.env, session.tenantId) : [],
  ]);
  const nowMs = Date.now();
  return render(
    c,
    state === "pending" ? "Pending approvals" : "Decided approvals",
    <>
      <h1>Approvals</h1>
      <p class="lede">
        Calls that wait for a person before toolgate sends anything. Approving sends the arguments
        shown, with this tool version, once — including fields the tool hides from traces.
      </p>
      <FlashBox flash={flash} />
      <nav aria-label="Approval lists" class="tabs">
        <a href={HOME} aria-current={state === "pending" ? "page" : undefined}>
          Pending
        </a>
        <a href={`${HOME}?state=decided`} aria-current={state === "decided" ? "page" : undefined}>
          Decided
        </a>
      </nav>
      {state === "pending" ? (
        page.items.length === 0 ? (
          <p class="empty">
            {cursor ? "No older requests are waiting." : "Nothing is waiting for approval."}
          </p>
        ) : (
          [
            <BatchForm csrf={session.csrf} />,
            ...page.items.map((item) => (
              <PendingCard
                item={item}
                exact={exact.get(item.operation_id) ?? null}
                notified={
                  notified ? (notified[item.operation_id] ?? { delivered: 0, failing: 0 }) : null
                }
                csrf={session.csrf}
                nowMs={nowMs}
                draft={draft?.operationId === item.operation_id ? draft.draft : undefined}
              />
            )),
          ]
        )
      ) : (
        <DecidedTable items={page.items} cursor={cursor ?? null} />
      )}
      <Pager state={state} cursor={cursor ?? null} next={page.next_cursor} />
      <CredentialWaits items={waits} />
      {/* A step-up card's approve button asks the browser for a passkey (approval-forms.tsx). */}
      {[...exact.values()].some((input) => input.step_up) && (
        <script src="/console/assets/passkey.js" defer></script>
      )}
    </>,
  );
}

export const Pager = ({
  state,
  cursor,
  next,
}: {
  state: "pending" | "decided";
  cursor: string | null;
  next: string | null;
}) =>
  cursor || next ? (
    <nav aria-label="Pages" class="pager">
      {cursor && <a href={state === "pending" ? HOME : `${HOME}?state=decided`}>← Newest</a>}
      {next && <a href={`${HOME}?state=${state}&cursor=${encodeURIComponent(next)}`}>Older →</a>}
    </nav>
  ) : null;

/**
 * Each pending request's real arguments, from its operation (this page needs approvals:decide):
 * the inbox row is a redacted copy. A request whose operation cannot answer now is shown redacted.
 */
async function exactInputs(
  c: Context<ConsoleEnv>,
  items: readonly Item[],
): Promise<Map<string, ApprovalInput>> {
  const tenantId = c.get("session").tenantId;
  const answers = await Promise.all(
    items.map((item) =>
      operationStub(c.env, item.operation_id)
        .approvalInput(tenantId)
        .catch(() => null),
    ),
  );
  const exact = new Map<string, ApprovalInput>();
  items.forEach((item, i) => {
    const answer = answers[i];
    // Only for the call the inbox row describes (a row out of step with its operation is not it).
    if (
      answer?.ok &&
      answer.value.input_hash === item.input_hash &&
      answer.value.approval_hash === item.approval_hash
    )
      exact.set(item.operation_id, answer.value);
  });
  return exact;
}

/** Reads the form, asks the operation to decide, and leaves the outcome as a flash for the inbox (303). */
async function decideFromForm(c: Context<ConsoleEnv>, verdict: "approve" | "reject") {
  if (!allowed(c)) return notAllowed(c);
  const session = c.get("session");
  const { operationId, field, reason, inputHash, toolVersion, approvalHash, refuse } =
    await readCardForm(c);
  if (!OPERATION_ID.test(operationId))
    return refuse("There is no such approval request in this tenant. Nothing was decided.");
  // The console always sends what it showed; a decision that does not say so is not taken.
  if (!inputHash || !toolVersion)
    return refuse(
      "This form did not say which arguments and tool version it decides, so nothing was decided. Reload the page and decide again.",
    );
  if (verdict === "reject" && !reason)
    return refuse("A rejection needs a reason (the agent is told it). Nothing was decided.");
  if (reason.length > MAX_REASON)
    return refuse(`A reason is at most ${MAX_REASON} characters. Nothing was decided.`);
  const by = await consoleDecider(c);
  if (by instanceof Response) return by;
  // A page shown before approval hashes binds to the arguments (a payment's approval then refuses it).
  const binding = approvalHash ? { approvalHash } : {};
  const stepUp = await consoleStepUp(
    c,
    by.id,
    { operationId, approvalHash: approvalHash || inputHash },
    field("passkey"),
  );
  if (stepUp instanceof Response) return stepUp;
  const decided = await operationStub(c.env, operationId).decide(session.tenantId, {
    verdict,
    approverId: by.id,
    via: by.via,
    scopes: by.scopes,
    ...(by.claims ? { claims: by.claims } : {}),
    ...stepUp,
    reason: reason || null,
    inputHash,
    toolVersion,
    ...binding,
  });
  await setFlash(c, decisionFlash(decided));
  return c.redirect(HOME, 303);
}

/**
 * The card's passkey assertion (filled by /console/assets/passkey.js for a step-up tool), verified
 * for this person and this approval hash; `{}` when the form carries none (the operation then refuses
 * an approval its tool steps up). One that does not verify decides nothing (401).
 */
async function consoleStepUp(
  c: Context<ConsoleEnv>,
  person: string,
  approval: { operationId: string; approvalHash: string },
  text: string,
): Promise<{ stepUp?: "passkey" } | Response> {
  if (!text) return {};
  let parsed: unknown = null;
  try {
    parsed = JSON.parse(text);
  } catch {}
  const assertion = PasskeyAssertion.safeParse(parsed);
  try {
    if (!assertion.success)
      throw new ApiProblem({
        code: "step_up_failed",
        detail: "the passkey answer was not an assertion",
      });
    const tenantId = c.get("session").tenantId;
    await verifyStepUp(c.env, c.req.url, tenantId, person, approval, assertion.data);
    return { stepUp: "passkey" };
  } catch (error) {
    if (!(error instanceof ApiProblem)) throw error;
    return problemPage(c, 401, "Not decided", `The passkey step-up failed: ${error.error.detail}.`);
  }
}

/**
 * Who decides from the console (issue 35): the person Cloudflare Access signed in, verified
 * (http/access.ts), else the session's key name. A token that does not verify decides nothing.
 */
export async function consoleDecider(c: Context<ConsoleEnv>): Promise<Decider | Response> {
  try {
    const person = await accessIdentity(c.env, c.req.header(ACCESS_HEADER));
    const { keyName, scopes } = c.get("session");
    return person
      ? { id: person.id, via: "access", scopes, claims: person.claims }
      : { id: keyName, via: "console", scopes };
  } catch (error) {
    if (!(error instanceof ApiProblem)) throw error;
    return problemPage(
      c,
      statusOf(error.error) === 401 ? 401 : 500,
      "Not decided",
      `Your Cloudflare Access sign-in could not be verified (${error.error.detail}). Sign in through Access again.`,
    );
  }
}

export const approvalsPage = definePage({
  nav: { label: "Pending approvals", href: HOME },
  routes: consoleRoutes()
    .get("/approvals", (c) => showInbox(c))
    .post("/approvals/batch", (c) =>
      allowed(c) ? decideBatchFromForm(c, () => consoleDecider(c)) : notAllowed(c),
    )
    .post("/approvals/:operation_id/approve", (c) => decideFromForm(c, "approve"))
    .post("/approvals/:operation_id/edit", (c) =>
      allowed(c)
        ? editFromForm(
            c,
            () => consoleDecider(c),
            (operationId, draft) => showInbox(c, { operationId, draft }),
          )
        : notAllowed(c),
    )
    .post("/approvals/:operation_id/reject", (c) => decideFromForm(c, "reject")),
});
