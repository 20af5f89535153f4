// /console/operations/{operation_id}: one operation — the call, whole (call-detail.tsx: target,
// frozen arguments, each request as sent and its answer, what the model got, who decided, the
// compensation links, replays) and its timeline, read from its run's trace like the run page (so a
// replay by another call of the run is seen). Needs runs:read and traces:read; another tenant's
// operation is indistinguishable from a missing one.
import type { Context } from "hono";
import { jurisdictionOf, OPERATION_ID } from "../domain/jurisdiction.ts";
import { operationStub, runStub } from "../durable/stubs.ts";
import type { ApiScope } from "../http/schemas.ts";
import { CallDetail, replaysOf } from "./call-detail.tsx";
import { Fact, Facts, RunFact } from "./facts.tsx";
import { problemPage, render } from "./layout.tsx";
import { consoleRoutes, definePage, type ConsoleEnv } from "./page.ts";
import { Badge, EventRow, groupTrace } from "./timeline.tsx";

const NEEDS: ApiScope[] = ["runs:read", "traces:read"];

async function showOperation(c: Context<ConsoleEnv>) {
  const session = c.get("session");
  const id = c.req.param("operation_id") ?? "";
  const missing = NEEDS.filter((scope) => !session.scopes.includes(scope));
  if (missing.length > 0)
    return problemPage(
      c,
      403,
      "Not allowed",
      `Viewing an operation needs an API key with the scopes ${missing.join(" and ")}.`,
    );
  const none = () =>
    problemPage(c, 404, "No such operation", "There is no operation with that id in this tenant.");
  if (!OPERATION_ID.test(id)) return none();
  const view = await operationStub(c.env, id)
    .get(session.tenantId, 0)
    .catch(() => null);
  if (!view?.ok) return none();
  const op = view.value;
  const trace = await runStub(c.env, op.run_id).traceFor(session.tenantId);
  const grouped = trace.ok ? groupTrace(trace.value.events) : null;
  const timeline = grouped?.operations.find((o) => o.operationId === id);
  const events = timeline?.events ?? [];
  const creators = new Map(grouped?.operations.map((o) => [o.operationId, o.callId]) ?? []);
  const replays = grouped ? (replaysOf(grouped.turns, creators).get(id) ?? []) : [];
  const originMs = Date.parse(op.created_at);
  return render(
    c,
    `Operation ${id}`,
    <>
      <p class="hint">
        <a href="/console">Home</a> › <a href={`/console/runs/${op.run_id}`}>Run</a> › Operation
      </p>
      <h1>
        {op.tool} <Badge status={op.phase === "recorded" ? op.result.status : op.phase} />
        {op.shadow && <span class="badge shadow">shadow</span>}
      </h1>
      <Facts>
        <RunFact runId={op.run_id} operationId={id} />
        <Fact label="Operation" mono>
          {id}
        </Fact>
        <Fact label="Call" mono>
          {op.call_id}
        </Fact>
        <Fact label="Jurisdiction">{jurisdictionOf(id) ?? "none (placed anywhere)"}</Fact>
      </Facts>
      <h2>The call</h2>
      <CallDetail view={op} events={events} replays={replays} />
      <h2>Timeline</h2>
      <ol class="timeline" aria-label={`Transitions of ${op.tool}`}>
        {events.map((event) => (
          <EventRow event={event} originMs={originMs} />
        ))}
      </ol>
    </>,
  );
}

export const operationPage = definePage({
  nav: null,
  routes: consoleRoutes().get("/operations/:operation_id", showOperation),
});
