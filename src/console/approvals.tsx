// /console/approvals: the tenant's approvals inbox (TenantObject.listApprovals), newest first, with
// cursor pages; a "decided" tab shows how each request ended. Each pending request shows what will
// run — tool, frozen arguments and target read from the operation itself (the inbox copy is
// redacted like the trace; fields the tool hides are named), preview — and its forms carry
// the input_hash and policy_version of what was shown, so a decision can never apply to other
// arguments or another tool version (the operation refuses a mismatch). The approver is the
// signed-in key's name; four eyes is the operation's check. Needs approvals:decide, for GET and POST.
import type { Context } from "hono";
import type {
  ApprovalInput,
  OperationError,
  OperationView,
} from "../durable/operation/contracts.ts";
import { operationStub, tenantStub } from "../durable/stubs.ts";
import type { ApprovalPage } from "../durable/tenant-object.ts";
import { toApiError } from "../http/problem.ts";
import { OPERATION_ID } from "../http/request.ts";
import { ApprovalsQuery } from "../http/schemas.ts";
import type { Result } from "../domain/result.ts";
import { setFlash, takeFlash, type Flash } from "./flash.ts";
import { expiresIn, pretty, splitTarget, utc } from "./format.ts";
import { FlashBox, problemPage, render } from "./layout.tsx";
import { consoleRoutes, definePage, type ConsoleEnv } from "./page.ts";
import { Badge } from "./timeline.tsx";

type Item = ApprovalPage["items"][number];
const PAGE_SIZE = 20;
const MAX_REASON = 2000;
const HOME = "/console/approvals";

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

async function showInbox(c: Context<ConsoleEnv>) {
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
  const exact = state === "pending" ? await exactInputs(c, page.items) : new Map();
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
          page.items.map((item) => (
            <PendingCard
              item={item}
              exact={exact.get(item.operation_id) ?? null}
              csrf={session.csrf}
              nowMs={nowMs}
            />
          ))
        )
      ) : (
        <DecidedTable items={page.items} cursor={cursor ?? null} />
      )}
      <Pager state={state} cursor={cursor ?? null} next={page.next_cursor} />
    </>,
  );
}

const Pager = ({
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
    if (answer?.ok && answer.value.input_hash === item.input_hash)
      exact.set(item.operation_id, answer.value);
  });
  return exact;
}

const PendingCard = ({
  item,
  exact,
  csrf,
  nowMs,
}: {
  item: Item;
  exact: ApprovalInput | null;
  csrf: string;
  nowMs: number;
}) => {
  const id = item.operation_id;
  const target = splitTarget(exact?.target ?? item.target);
  const expiry = expiresIn(Date.parse(item.expires_at), nowMs);
  return (
    <article class="item" id={id} aria-labelledby={`${id}-title`} data-operation={id}>
      <header>
        <h2 id={`${id}-title`}>{item.tool}</h2>
        <Badge status="awaiting_approval" />
        <span class={expiry.expired ? "chip expired" : "chip"}>{expiry.text}</span>
      </header>
      <div class="item-body">
        <dl class="facts">
          <dt>Target</dt>
          <dd>
            {target.method && <code class="method">{target.method}</code>} <code>{target.url}</code>
          </dd>
          <dt>Asked by</dt>
          <dd>
            <span class="mono">{item.requested_by}</span> <span class="hint">(the run's user)</span>
          </dd>
          <dt>Run</dt>
          <dd>
            <a class="mono" href={`/console/runs/${item.run_id}#${id}`}>
              {item.run_id}
            </a>
          </dd>
          <dt>Requested</dt>
          <dd>
            <time datetime={item.requested_at}>{utc(item.requested_at)}</time>
          </dd>
          <dt>Expires</dt>
          <dd>
            <time datetime={item.expires_at}>{utc(item.expires_at)}</time>{" "}
            <span class="hint">({expiry.text})</span>
          </dd>
          <dt>Operation</dt>
          <dd class="mono">{id}</dd>
        </dl>
        {exact ? (
          <>
            <h3 id={`${id}-args`}>Arguments, as they will be sent</h3>
            <pre aria-labelledby={`${id}-args`} data-role="arguments">
              <code>{pretty(exact.arguments)}</code>
            </pre>
            {exact.hidden.length > 0 && (
              <p class="hint" data-role="hidden-fields">
                Hidden from traces, logs and exports (shown here because you decide):{" "}
                {exact.hidden.map((pointer, i) => (
                  <>
                    {i > 0 && ", "}
                    <code>{pointer}</code>
                  </>
                ))}
              </p>
            )}
          </>
        ) : (
          <>
            <h3 id={`${id}-args`}>Arguments, as the trace shows them</h3>
            <p class="alert" data-role="arguments-unavailable">
              toolgate could not read this call's arguments from the operation just now, so fields
              the tool hides from traces show as [redacted]. Reload before you approve.
            </p>
            <pre aria-labelledby={`${id}-args`} data-role="arguments">
              <code>{pretty(item.arguments)}</code>
            </pre>
          </>
        )}
        <h3 id={`${id}-preview`}>Preview</h3>
        <Preview preview={item.preview} labelledBy={`${id}-preview`} />
        {expiry.expired ? (
          <p class="alert">
            This request has expired. Nothing was sent; toolgate records it as expired and tells the
            agent.
          </p>
        ) : (
          <DecideForms item={item} csrf={csrf} />
        )}
        <p class="hint fingerprint">
          Bound to input hash <span class="mono">{item.input_hash}</span> and tool version{" "}
          <span class="mono">{item.policy_version}</span>.
        </p>
      </div>
    </article>
  );
};

const Preview = ({ preview, labelledBy }: { preview: Item["preview"]; labelledBy: string }) => {
  if (!preview) return <p class="empty">No preview for this call.</p>;
  return (
    <div class="preview">
      <p>
        {preview.status === null ? (
          "The preview request got no answer"
        ) : (
          <>
            The tool answered <code>HTTP {String(preview.status)}</code>
          </>
        )}
        {preview.detail && <>: {preview.detail}</>}
      </p>
      {preview.body !== null && (
        <pre aria-labelledby={labelledBy} data-role="preview">
          <code>{pretty(preview.body)}</code>
        </pre>
      )}
    </div>
  );
};

const Bound = ({ item, csrf }: { item: Item; csrf: string }) => (
  <>
    <input type="hidden" name="csrf" value={csrf} />
    <input type="hidden" name="input_hash" value={item.input_hash} />
    <input type="hidden" name="policy_version" value={item.policy_version} />
  </>
);

const DecideForms = ({ item, csrf }: { item: Item; csrf: string }) => {
  const id = item.operation_id;
  return (
    <div class="decide">
      <form
        method="post"
        action={`${HOME}/${id}/approve`}
        class="stack"
        aria-label={`Approve ${item.tool}`}
      >
        <Bound item={item} csrf={csrf} />
        <div>
          <label for={`${id}-approve-reason`}>Reason for approving</label>
          <p class="hint" id={`${id}-approve-hint`}>
            Optional. Recorded with your name in the operation's log.
          </p>
          <textarea
            id={`${id}-approve-reason`}
            name="reason"
            rows={2}
            maxlength={MAX_REASON}
            aria-describedby={`${id}-approve-hint`}
          ></textarea>
        </div>
        <div>
          <button type="submit" class="approve">
            Approve and run
          </button>
        </div>
      </form>
      <form
        method="post"
        action={`${HOME}/${id}/reject`}
        class="stack"
        aria-label={`Reject ${item.tool}`}
      >
        <Bound item={item} csrf={csrf} />
        <div>
          <label for={`${id}-reject-reason`}>Reason for rejecting</label>
          <p class="hint" id={`${id}-reject-hint`}>
            Required. The agent is told this call was rejected, with your reason.
          </p>
          <textarea
            id={`${id}-reject-reason`}
            name="reason"
            rows={2}
            maxlength={MAX_REASON}
            required
            aria-describedby={`${id}-reject-hint`}
          ></textarea>
        </div>
        <div>
          <button type="submit" class="reject">
            Reject
          </button>
        </div>
      </form>
    </div>
  );
};

const DecidedTable = ({ items, cursor }: { items: Item[]; cursor: string | null }) =>
  items.length === 0 ? (
    <p class="empty">
      {cursor ? "No older decisions." : "No approval request has been decided yet."}
    </p>
  ) : (
    <table class="decided">
      <caption>Decided requests, newest first</caption>
      <thead>
        <tr>
          <th scope="col">Tool</th>
          <th scope="col">Outcome</th>
          <th scope="col">By</th>
          <th scope="col">Reason</th>
          <th scope="col">When</th>
          <th scope="col">Run</th>
        </tr>
      </thead>
      <tbody>
        {items.map((item) => (
          <tr data-operation={item.operation_id}>
            <td>
              <span class="mono">{item.tool}</span>
              <details>
                <summary>Arguments (as the trace shows them)</summary>
                <pre>
                  <code>{pretty(item.arguments)}</code>
                </pre>
              </details>
            </td>
            <td>
              <Badge status={item.state} />
            </td>
            <td class="mono">{item.decided_by ?? "—"}</td>
            <td>{item.reason ?? "—"}</td>
            <td>
              {item.decided_at ? (
                <time datetime={item.decided_at}>{utc(item.decided_at)}</time>
              ) : (
                <span class="hint">asked {utc(item.requested_at)}</span>
              )}
            </td>
            <td>
              <a class="mono" href={`/console/runs/${item.run_id}#${item.operation_id}`}>
                {item.run_id}
              </a>
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );

/** Reads the form, asks the operation to decide, and leaves the outcome as a flash for the inbox (303). */
async function decideFromForm(c: Context<ConsoleEnv>, verdict: "approve" | "reject") {
  if (!allowed(c)) return notAllowed(c);
  const session = c.get("session");
  const operationId = c.req.param("operation_id") ?? "";
  const form = await c.req.parseBody();
  const field = (name: string) => (typeof form[name] === "string" ? (form[name] as string) : "");
  const reason = field("reason").trim();
  const inputHash = field("input_hash");
  const policyVersion = field("policy_version");
  const refuse = async (text: string) => {
    await setFlash(c, { tone: "error", text });
    return c.redirect(HOME, 303);
  };
  if (!OPERATION_ID.test(operationId))
    return refuse("There is no such approval request in this tenant. Nothing was decided.");
  // The console always sends what it showed; a decision that does not say so is not taken.
  if (!inputHash || !policyVersion)
    return refuse(
      "This form did not say which arguments and tool version it decides, so nothing was decided. Reload the page and decide again.",
    );
  if (verdict === "reject" && !reason)
    return refuse("A rejection needs a reason (the agent is told it). Nothing was decided.");
  if (reason.length > MAX_REASON)
    return refuse(`A reason is at most ${MAX_REASON} characters. Nothing was decided.`);
  const decided = await operationStub(c.env, operationId).decide(session.tenantId, {
    verdict,
    approverId: session.keyName,
    reason: reason || null,
    inputHash,
    policyVersion,
  });
  await setFlash(c, decisionFlash(decided, verdict, session.keyName));
  return c.redirect(HOME, 303);
}

/** What happened, in words: the operation's answer is authoritative (it may already have been decided). */
export function decisionFlash(
  decided: Result<OperationView, OperationError>,
  verdict: "approve" | "reject",
  me: string,
): Flash {
  if (!decided.ok) {
    const { code, detail } = toApiError(decided.error);
    switch (code) {
      case "self_approval":
        return { tone: "error", text: `Refused (four eyes): ${detail}. Nothing was decided.` };
      case "approval_mismatch":
        return {
          tone: "error",
          text: `Refused: ${detail} (it changed since this page was shown). Nothing was decided; reload and check it again.`,
        };
      case "not_found":
        return {
          tone: "error",
          text: "There is no such approval request in this tenant. Nothing was decided.",
        };
      default:
        return { tone: "error", text: `Nothing was decided: ${detail}.` };
    }
  }
  const view = decided.value;
  const approval = view.approval;
  const tool = view.tool;
  if (!approval)
    return { tone: "error", text: `${tool} does not wait for approval. Nothing was decided.` };
  const mine =
    approval.decided_by === me && (approval.state === "approved") === (verdict === "approve");
  switch (approval.state) {
    case "pending":
      return {
        tone: "error",
        text: `${tool} is still waiting; your decision was not recorded. Try again.`,
      };
    case "expired":
      return {
        tone: "error",
        text: `Refused: the approval for ${tool} had expired, so nothing was run. The agent is told it needs a person's approval.`,
      };
    case "cancelled":
      return {
        tone: "error",
        text: `${tool} was cancelled before it was decided, so nothing was run.`,
      };
    case "approved":
    case "rejected": {
      if (!mine)
        return {
          tone: "info",
          text: `${tool} was already ${approval.state} by ${approval.decided_by ?? "someone"}${approval.decided_at ? ` at ${utc(approval.decided_at)}` : ""}; your decision was not recorded.`,
        };
      if (approval.state === "rejected")
        return {
          tone: "ok",
          text: `Rejected ${tool}. Nothing was sent; the agent is told it was rejected.`,
        };
      const result = view.result;
      // Approval is not authorization: the run may refuse it now (scopes revoked, deadline, tool changed).
      if (view.phase === "recorded" && result.status !== "succeeded")
        return {
          tone: "error",
          text: `Approved, but toolgate did not run ${tool}: ${result.message}`,
        };
      return {
        tone: "ok",
        text: `Approved ${tool}. It runs once now, with the arguments and tool version you approved; follow it on the run page.`,
      };
    }
  }
}

export const approvalsPage = definePage({
  nav: { label: "Pending approvals", href: HOME },
  routes: consoleRoutes()
    .get("/approvals", showInbox)
    .post("/approvals/:operation_id/approve", (c) => decideFromForm(c, "approve"))
    .post("/approvals/:operation_id/reject", (c) => decideFromForm(c, "reject")),
});
