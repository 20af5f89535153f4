// /console/runs/{run_id}: one run — its mode, user, offered tools, bound context, budgets against
// usage, a rollback's steps once it was cancelled with one — and the timeline of every turn and every
// operation's transitions and attempts, from the same run trace the API serves
// (GET /v1/runs/{id}/trace). Needs runs:read and traces:read.
import type { Context } from "hono";
import type { IdempotencyWarning, RunView } from "../durable/run/contracts.ts";
import { runStub } from "../durable/stubs.ts";
import { RUN_ID } from "../http/request.ts";
import type { ApiScope } from "../http/schemas.ts";
import { FlashBox, problemPage, render } from "./layout.tsx";
import { consoleRoutes, definePage, type ConsoleEnv } from "./page.ts";
import type { TraceOf } from "../domain/journal/trace-event.ts";
import { Badge, clock, EventRow, groupTrace, OperationCard, since } from "./timeline.tsx";
import { Waterfall } from "./waterfall.tsx";
import { shadowWrites, WouldHaveSent } from "./shadow-list.tsx";
import { RollbackPlanForm, RollbackSteps } from "./rollback-list.tsx";
import { consoleDecider } from "./approvals.tsx";
import { setFlash, takeFlash } from "./flash.ts";
import { ApproveRollbackPlan } from "../http/schemas.ts";
import { toApiError } from "../http/problem.ts";
import { CallDetail, callViews, replaysOf } from "./call-detail.tsx";
import { jurisdictionOf } from "../domain/jurisdiction.ts";

const NEEDS: ApiScope[] = ["runs:read", "traces:read"];

async function showRun(c: Context<ConsoleEnv>) {
  const session = c.get("session");
  const runId = c.req.param("run_id") ?? "";
  const missing = NEEDS.filter((scope) => !session.scopes.includes(scope));
  if (missing.length > 0)
    return problemPage(
      c,
      403,
      "Not allowed",
      `Viewing a run needs an API key with the scopes ${missing.join(" and ")}.`,
    );
  // Another tenant's run is indistinguishable from a missing one.
  if (!RUN_ID.test(runId))
    return problemPage(c, 404, "No such run", "There is no run with that id in this tenant.");
  const stub = runStub(c.env, runId);
  const [run, trace, warnings, flash] = await Promise.all([
    stub.get(session.tenantId),
    stub.traceFor(session.tenantId),
    stub.idempotencyWarnings(session.tenantId),
    takeFlash(c),
  ]);
  if (!run.ok || !trace.ok)
    return problemPage(c, 404, "No such run", "There is no run with that id in this tenant.");
  const grouped = groupTrace(trace.value.events);
  const originMs = Date.parse(run.value.created_at);
  const views = await callViews(
    c.env,
    session.tenantId,
    grouped.operations.map((op) => op.operationId),
  );
  const replays = replaysOf(
    grouped.turns,
    new Map(grouped.operations.map((op) => [op.operationId, op.callId])),
  );
  // A running rollback's plan, for people who may decide (issue 35 item 4).
  const canDecide = session.scopes.includes("approvals:decide");
  const plan =
    canDecide && run.value.rollback?.state === "running"
      ? await stub.rollbackPlan(session.tenantId)
      : null;
  const shadow =
    run.value.mode === "shadow"
      ? await shadowWrites(c.env, session.tenantId, grouped.operations)
      : null;
  return render(
    c,
    `Run ${runId}`,
    <>
      <p class="hint">
        <a href="/console">Home</a> › Run
      </p>
      <h1>
        Run <span class="mono">{runId}</span> <Badge status={run.value.status} />
      </h1>
      <Summary
        run={run.value}
        tenantId={session.tenantId}
        warnings={warnings.ok ? warnings.value : []}
      />
      {shadow ? <WouldHaveSent views={shadow} /> : null}
      <FlashBox flash={flash} />
      {run.value.rollback ? <RollbackSteps rollback={run.value.rollback} /> : null}
      {plan?.ok ? <RollbackPlanForm runId={runId} plan={plan.value} csrf={session.csrf} /> : null}
      <h2 id="waterfall">Waterfall</h2>
      <Waterfall operations={grouped.operations} nowMs={Date.now()} />
      <h2 id="timeline">Timeline</h2>
      <p class="hint">Times are UTC, with the offset from the run's creation. Newest last.</p>
      <section aria-labelledby="turns-title">
        <h3 id="turns-title">Run and turns</h3>
        <ol class="timeline" aria-label="Run and turns">
          {[...grouped.run, ...grouped.turns]
            .sort((a, b) => a.at_ms - b.at_ms)
            .map((event) =>
              event.type === "turn_received" ? (
                <TurnRow event={event} originMs={originMs} />
              ) : (
                <EventRow event={event} originMs={originMs} />
              ),
            )}
        </ol>
      </section>
      <h2 id="operations-title">Operations</h2>
      {grouped.operations.length === 0 ? (
        <p>No operation has started in this run yet.</p>
      ) : (
        grouped.operations.map((op) => {
          const view = views.get(op.operationId);
          return (
            <>
              <OperationCard op={op} originMs={originMs} />
              {view && (
                <details class="call-detail" open>
                  <summary>
                    The call, whole ·{" "}
                    <a href={`/console/operations/${op.operationId}`}>operation page</a>
                  </summary>
                  <CallDetail
                    view={view}
                    events={op.events}
                    replays={replays.get(op.operationId) ?? []}
                  />
                </details>
              )}
            </>
          );
        })
      )}
    </>,
  );
}

const Summary = ({
  run,
  tenantId,
  warnings,
}: {
  run: RunView;
  tenantId: string;
  warnings: IdempotencyWarning[];
}) => {
  const rows: Array<[string, number, number | undefined]> = [
    ["Turns", run.usage.turns, run.budgets.max_turns],
    ["Tool calls", run.usage.tool_calls, run.budgets.max_tool_calls],
    ["Cost (units)", run.usage.cost, run.budgets.max_cost],
  ];
  const context = Object.entries(run.context);
  return (
    <div class="grid">
      <section class="card" aria-labelledby="run-facts">
        <h2 id="run-facts">Run</h2>
        <dl class="facts">
          <dt>Mode</dt>
          <dd>
            {run.mode === "shadow"
              ? "shadow: writes go to each tool's sandbox, never to production"
              : "live"}
          </dd>
          <dt>User</dt>
          <dd class="mono">{run.user.id}</dd>
          <dt>User scopes</dt>
          <dd>{run.user.scopes.length > 0 ? run.user.scopes.join(", ") : "none"}</dd>
          <dt>Tools</dt>
          <dd>
            {run.tools.map((name, index) => {
              // A tool whose idempotency key no verification vouches for (POST /v1/tools/{name}/verify).
              const warning = warnings.find((w) => w.tool === name);
              return (
                <>
                  {index > 0 ? ", " : ""}
                  {name}
                  {warning ? (
                    <>
                      {" "}
                      <span class={`badge ${warning.status}`} title={warning.detail}>
                        idempotency {warning.status.replace(/_/g, " ")}
                      </span>
                    </>
                  ) : null}
                </>
              );
            })}
          </dd>
          <dt>Jurisdiction</dt>
          <dd data-role="jurisdiction">
            run {run.jurisdiction ?? "none"} · tenant {jurisdictionOf(tenantId) ?? "none"}
          </dd>
          <dt>Notify endpoint</dt>
          <dd data-role="notify">
            {run.notify_webhook_id ? (
              <>
                <span class="mono">{run.notify_webhook_id}</span> (gets this run's turn.settled;
                deliveries:{" "}
                <span class="mono">GET /v1/webhooks/{run.notify_webhook_id}/deliveries</span>)
              </>
            ) : (
              "none"
            )}
          </dd>
          <dt>Created</dt>
          <dd>{stamp(run.created_at)}</dd>
          <dt>Expires</dt>
          <dd>{stamp(run.expires_at)}</dd>
        </dl>
      </section>
      <section class="card" aria-labelledby="run-budgets">
        <h2 id="run-budgets">Budgets and usage</h2>
        <table>
          <thead>
            <tr>
              <th scope="col">Budget</th>
              <th scope="col" class="num">
                Used
              </th>
              <th scope="col" class="num">
                Limit
              </th>
            </tr>
          </thead>
          <tbody>
            {rows.map(([name, used, limit]) => (
              <tr>
                <th scope="row">{name}</th>
                <td class="num">{String(used)}</td>
                <td class="num">{limit === undefined ? "none" : String(limit)}</td>
              </tr>
            ))}
            <tr>
              <th scope="row">Duration</th>
              <td class="num">—</td>
              <td class="num">
                {run.budgets.max_duration_ms === undefined
                  ? "none"
                  : `${run.budgets.max_duration_ms / 1000} s`}
              </td>
            </tr>
          </tbody>
        </table>
      </section>
      {context.length > 0 && (
        <section class="card" aria-labelledby="run-context">
          <h2 id="run-context">Bound context</h2>
          <dl class="facts">
            {context.map(([name, value]) => (
              <>
                <dt>{name}</dt>
                <dd class="mono">{typeof value === "string" ? value : JSON.stringify(value)}</dd>
              </>
            ))}
          </dl>
        </section>
      )}
    </div>
  );
};

const TurnRow = ({ event, originMs }: { event: TraceOf<"turn_received">; originMs: number }) => (
  <li data-event="turn_received">
    <span>
      <time datetime={new Date(event.at_ms).toISOString()}>{clock(event.at_ms)}</time>{" "}
      <span class="hint">{since(event.at_ms, originMs)}</span>
    </span>
    <span class="what">Turn received</span>
    <span class="details">
      <span class="kv">
        <b>turn</b> <span class="mono">{event.turn_id}</span>
      </span>
      <ul>
        {event.calls.map((call) => (
          <li>
            <span class="mono">{call.call_id}</span> → {call.name}{" "}
            {call.fixed ? (
              <>
                <Badge status={call.fixed} /> {call.code && <code>{call.code}</code>}
              </>
            ) : (
              <a href={`#${call.operation_id}`}>operation</a>
            )}
          </li>
        ))}
      </ul>
    </span>
  </li>
);

const stamp = (iso: string) => <time datetime={iso}>{iso.replace("T", " ").slice(0, 19)} UTC</time>;

/** The plan's form (issue 35 item 4): the same run RPC and checks as POST /v1/runs/{id}/rollback/approve. */
async function approvePlan(c: Context<ConsoleEnv>) {
  const session = c.get("session");
  const runId = c.req.param("run_id") ?? "";
  if (!session.scopes.includes("approvals:decide"))
    return problemPage(c, 403, "Not allowed", "Approving a plan needs the scope approvals:decide.");
  if (!RUN_ID.test(runId))
    return problemPage(c, 404, "No such run", "There is no run with that id in this tenant.");
  const form = await c.req.parseBody();
  // The form carries what the page showed, each item's hash and tool version (rollback-list.tsx).
  const listed = (name: string) => (typeof form[name] === "string" ? form[name].split(",") : []);
  const versions = listed("policy_versions");
  const body = ApproveRollbackPlan.safeParse({
    items: listed("input_hashes").map((hash, i) => ({
      input_hash: hash,
      policy_version: versions[i],
    })),
    ...(typeof form.reason === "string" && form.reason.trim() ? { reason: form.reason } : {}),
  });
  const back = `/console/runs/${runId}`;
  if (!body.success) {
    await setFlash(c, { tone: "error", text: "Nothing was approved: the form was not complete." });
    return c.redirect(back, 303);
  }
  const by = await consoleDecider(c);
  if (by instanceof Response) return by;
  const approved = await runStub(c.env, runId).approveRollbackPlan(
    session.tenantId,
    by,
    body.data.items,
    body.data.reason ?? null,
  );
  await setFlash(
    c,
    approved.ok
      ? { tone: "ok", text: `The plan is approved by ${by.id}: its compensations run as reached.` }
      : { tone: "error", text: `Not approved: ${toApiError(approved.error).detail}` },
  );
  return c.redirect(back, 303);
}

export const runPage = definePage({
  nav: null,
  routes: consoleRoutes()
    .get("/runs/:run_id", showRun)
    .post("/runs/:run_id/rollback/approve", approvePlan),
});
