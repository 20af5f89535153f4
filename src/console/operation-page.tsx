// /console/operations/{operation_id}: one operation — the call, whole (call-detail.tsx: target,
// frozen arguments, each request as sent and its answer, what the model got, who decided, the
// compensation links, replays) and its timeline, read from its run's trace like the run page (so a
// replay by another call of the run is seen). Needs runs:read and traces:read; another tenant's
// operation is indistinguishable from a missing one. A held call names what holds it (a freeze,
// linked to the Freezes page, or a person's pause); Pause / Resume / Retry now are shown when they
// apply (the view's `controls`) to an operations:resolve session, CSRF-checked POSTs to the same
// OperationObject RPCs as the API, whose answer comes back as a flash.
import type { Context } from "hono";
import { jurisdictionOf, OPERATION_ID } from "../domain/jurisdiction.ts";
import { operationStub, runStub } from "../durable/stubs.ts";
import type { ApiScope } from "../http/schemas.ts";
import { CallDetail, replaysOf } from "./call-detail.tsx";
import { Fact, Facts, RunFact } from "./facts.tsx";
import { FlashBox, problemPage, render } from "./layout.tsx";
import { setFlash, takeFlash } from "./flash.ts";
import { FREEZES_HREF } from "./freezes.tsx";
import { utc } from "./format.ts";
import type { OperationView } from "../durable/operation/contracts.ts";
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
  const flash = await takeFlash(c);
  const csrf = session.scopes.includes("operations:resolve") ? session.csrf : null;
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
      <FlashBox flash={flash} />
      <Hold op={op} csrf={csrf} />
      <AwaitingCredential op={op} />
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

/**
 * A call waiting for its end user to connect (issue 36): nothing was sent; the link is the one the
 * model was given to pass on (single-use; POST /v1/connections makes another).
 */
const AwaitingCredential = ({ op }: { op: OperationView }) => {
  const envelope = op.result;
  if (envelope.status !== "pending" || envelope.code !== "credential_required") return null;
  return (
    <section class="card" aria-label="Waiting for the user to connect" data-awaiting="credential">
      <p>
        Waiting for the user to connect their account: nothing has been sent. {envelope.message}
      </p>
      {envelope.connect_url && (
        <p>
          Connect link for the user: <a href={envelope.connect_url}>open to connect</a>
        </p>
      )}
    </section>
  );
};

/** What holds the call (if anything) and the controls that apply now. */
const Hold = ({ op, csrf }: { op: OperationView; csrf: string | null }) => {
  const { held, controls } = op;
  const buttons = CONTROLS.filter((control) => controls[control.applies]);
  if (!held && buttons.length === 0) return null;
  return (
    <section class="card" aria-label="Hold and controls" data-held={held?.kind ?? "no"}>
      {held?.kind === "freeze" && (
        <p>
          Held by freeze{" "}
          <a href={`${FREEZES_HREF}#freeze-${held.freeze_id}`} class="mono">
            {held.freeze_id}
          </a>{" "}
          ({held.reason}) since {utc(held.since)}: nothing is sent until it is lifted, then it
          continues by itself. To send it sooner, lift the freeze; a person's pause or retry-now
          applies once it is lifted.
        </p>
      )}
      {held?.kind === "pause" && (
        <p>
          Paused by {held.by} since {utc(held.since)}: nothing is sent until someone resumes it.
        </p>
      )}
      {csrf && buttons.length > 0 && (
        <div class="actions">
          {buttons.map((control) => (
            <form method="post" action={`/console/operations/${op.operation_id}/${control.path}`}>
              <input type="hidden" name="csrf" value={csrf} />
              <button type="submit">{control.label}</button>
            </form>
          ))}
        </div>
      )}
      {!csrf && buttons.length > 0 && (
        <p class="hint">Pausing, resuming or retrying needs the scope operations:resolve.</p>
      )}
    </section>
  );
};

const CONTROLS = [
  { applies: "pause", path: "pause", label: "Pause", method: "pause", did: "Paused" },
  { applies: "resume", path: "resume", label: "Resume", method: "resume", did: "Resumed" },
  {
    applies: "retry_now",
    path: "retry-now",
    label: "Retry now",
    method: "retryNow",
    did: "Sent the next attempt",
  },
] as const;

/** A control's POST: the operation decides (the same RPC as the API); its answer is the flash. */
async function control(c: Context<ConsoleEnv>, which: (typeof CONTROLS)[number]) {
  const session = c.get("session");
  const id = c.req.param("operation_id") ?? "";
  if (!session.scopes.includes("operations:resolve") || !OPERATION_ID.test(id))
    return problemPage(c, 403, "Not allowed", "This needs the scope operations:resolve.");
  const done = await operationStub(c.env, id)[which.method](session.tenantId, session.keyName);
  await setFlash(
    c,
    done.ok
      ? { tone: "ok", text: `${which.did}: the call is now ${done.value.phase}.` }
      : {
          tone: "error",
          text: `Nothing changed (${done.error.code}): ${"detail" in done.error ? done.error.detail : done.error.code}`,
        },
  );
  return c.redirect(`/console/operations/${id}`, 303);
}

export const operationPage = definePage({
  nav: null,
  routes: CONTROLS.reduce(
    (routes, which) =>
      routes.post(`/operations/:operation_id/${which.path}`, (c) => control(c, which)),
    consoleRoutes().get("/operations/:operation_id", showOperation),
  ),
});
