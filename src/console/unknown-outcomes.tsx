// /console/unknown-outcomes: writes whose outcome toolgate could not prove and has no automatic way
// left to settle, or that it still settles late by itself (issue 24), from TenantObject.listUnknowns,
// one card each (unknown-card.tsx) with a form for a person's verdict (verdict-form.tsx, checked
// by verdict.ts). Needs operations:resolve, for GET and POST. A form that does not parse is shown
// again with its values and the error (400); a verdict taken redirects with a flash (303).
import type { Context } from "hono";
import type { OperationView } from "../durable/operation/contracts.ts";
import { operationStub, tenantStub } from "../durable/stubs.ts";
import { toApiError } from "../http/problem.ts";
import { OPERATION_ID } from "../http/request.ts";
import { setFlash, takeFlash, type Flash } from "./flash.ts";
import { FlashBox, problemPage, render } from "./layout.tsx";
import { consoleRoutes, definePage, type ConsoleEnv } from "./page.ts";
import { UnknownCard, type Waiting } from "./unknown-card.tsx";
import { HOME, parseVerdict, type FormState, type Outcome } from "./verdict.ts";

const LIST_LIMIT = 50;

const allowed = (c: Context<ConsoleEnv>) => c.get("session").scopes.includes("operations:resolve");
const notAllowed = (c: Context<ConsoleEnv>) =>
  problemPage(
    c,
    403,
    "Not allowed",
    "Resolving unknown outcomes needs an API key with the scope operations:resolve. Nothing was shown or changed.",
  );

async function waiting(c: Context<ConsoleEnv>): Promise<Waiting[]> {
  const tenantId = c.get("session").tenantId;
  const listed = await tenantStub(c.env, tenantId).listUnknowns(LIST_LIMIT);
  const details = await Promise.all(
    listed.map(async (item) => {
      const stub = operationStub(c.env, item.operation_id);
      const [view, trace] = await Promise.all([stub.get(tenantId, 0), stub.traceFor(tenantId)]);
      // The list is derived and may lag the operation by a moment: show only what still waits.
      return view.ok && trace.ok && view.value.phase === "outcome_unknown"
        ? { ...item, view: view.value, events: trace.value }
        : null;
    }),
  );
  return details.filter((item): item is Waiting => item !== null);
}

async function showList(c: Context<ConsoleEnv>, form: FormState | null = null) {
  const [items, stored] = await Promise.all([
    waiting(c),
    form ? Promise.resolve(null) : takeFlash(c),
  ]);
  // Whether each card's operation.outcome_unknown event reached the webhooks: one RPC per page.
  const notified = await tenantStub(c.env, c.get("session").tenantId)
    .notificationStates(
      items.map((item) => item.operation_id),
      "operation.outcome_unknown",
    )
    .catch(() => null);
  const csrf = c.get("session").csrf;
  const nowMs = Date.now();
  return render(
    c,
    "Unknown outcomes",
    <>
      <h1>Unknown outcomes</h1>
      <p class="lede">
        Writes that may or may not have happened upstream: those toolgate cannot settle by itself,
        and those it is still settling by itself (a verdict here stops that). Check the upstream
        system, then record what happened: the agent gets exactly that answer.
      </p>
      <FlashBox flash={stored} />
      {items.length === 0 ? (
        <p class="empty">Nothing is waiting for a person.</p>
      ) : (
        items.map((item) => (
          <UnknownCard
            item={item}
            csrf={csrf}
            nowMs={nowMs}
            form={form?.operationId === item.operation_id ? form : null}
            notified={
              notified ? (notified[item.operation_id] ?? { delivered: 0, failing: 0 }) : null
            }
          />
        ))
      )}
    </>,
    form ? 400 : 200,
  );
}

async function resolveFromForm(c: Context<ConsoleEnv>) {
  if (!allowed(c)) return notAllowed(c);
  const session = c.get("session");
  const operationId = c.req.param("operation_id") ?? "";
  const body = await c.req.parseBody();
  const field = (name: string) => (typeof body[name] === "string" ? (body[name] as string) : "");
  const form = { outcome: field("outcome"), result: field("result"), reason: field("reason") };
  if (!OPERATION_ID.test(operationId)) {
    await setFlash(c, {
      tone: "error",
      text: "There is no such operation in this tenant. Nothing was recorded.",
    });
    return c.redirect(HOME, 303);
  }
  const verdict = parseVerdict(form);
  if (!verdict.ok) return showList(c, { operationId, error: verdict.error, ...form });
  const resolved = await operationStub(c.env, operationId).resolve(session.tenantId, {
    outcome: verdict.outcome,
    result: verdict.result,
    reason: verdict.reason,
    by: session.keyName,
  });
  await setFlash(
    c,
    resolved.ok
      ? resolvedFlash(resolved.value, verdict.outcome)
      : refusedFlash(toApiError(resolved.error)),
  );
  return c.redirect(HOME, 303);
}

function resolvedFlash(view: OperationView, outcome: Outcome): Flash {
  switch (outcome) {
    case "succeeded":
      return {
        tone: "ok",
        text: `Recorded: ${view.tool} happened. The agent is told it succeeded.`,
      };
    case "failed":
      return {
        tone: "ok",
        text: `Recorded: ${view.tool} did not happen. The agent is told not to retry.`,
      };
    case "resend":
      return {
        tone: "ok",
        text: `Sending ${view.tool} again with the same idempotency key; follow it on the run page.`,
      };
  }
}

function refusedFlash(error: ReturnType<typeof toApiError>): Flash {
  switch (error.code) {
    case "not_outcome_unknown":
      return {
        tone: "info",
        text: `Nothing was recorded: ${error.detail} (someone or something settled it already).`,
      };
    case "resend_not_allowed":
      return { tone: "error", text: `Not sent again: ${error.detail}.` };
    case "not_found":
      return {
        tone: "error",
        text: "There is no such operation in this tenant. Nothing was recorded.",
      };
    default:
      return { tone: "error", text: `Nothing was recorded: ${error.detail}.` };
  }
}

export const unknownOutcomesPage = definePage({
  nav: { label: "Unknown outcomes", href: HOME },
  routes: consoleRoutes()
    .get("/unknown-outcomes", (c) => (allowed(c) ? showList(c) : notAllowed(c)))
    .post("/unknown-outcomes/:operation_id/resolve", resolveFromForm),
});
