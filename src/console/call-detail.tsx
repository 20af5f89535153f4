// The call, whole (issue 33): what an operator needs to judge one operation — its target and frozen
// arguments (redacted like the trace: the operation view's `redacted`), each attempt's request as
// sent and what the upstream answered (the `request`/`response` of its `attempt_finished` events:
// secrets by name, never valued), the result the model got, who approved or settled it and why, its
// compensation links, and the calls answered from its stored outcome without a new request (replays).
// Shown on the run page under each operation and on the operation page. All text is escaped.
import type { FC } from "hono/jsx";
import { eventsOf, firstOf, type TraceEvent, type TraceOf } from "../domain/journal/trace-event.ts";
import type { Env } from "../durable/env.ts";
import type { OperationView } from "../durable/operation/contracts.ts";
import { operationStub } from "../durable/stubs.ts";
import { Fact, Facts } from "./facts.tsx";
import { pretty, utc, viaText } from "./format.ts";

/** A call of a turn answered from an operation's stored outcome (another call created it). */
export type Replay = { turn_id: string; call_id: string };

type TurnLike = {
  turn_id?: unknown;
  calls: Array<{ call_id: string; operation_id: string; fixed?: string }>;
};

/** Per operation, the calls that were answered from it although they did not create it. */
export function replaysOf(
  turns: readonly TurnLike[],
  creators: ReadonlyMap<string, string>,
): Map<string, Replay[]> {
  const out = new Map<string, Replay[]>();
  for (const turn of turns)
    for (const call of turn.calls) {
      const creator = creators.get(call.operation_id);
      if (call.fixed || creator === undefined || creator === call.call_id) continue;
      const replay = { turn_id: String(turn.turn_id), call_id: call.call_id };
      out.set(call.operation_id, [...(out.get(call.operation_id) ?? []), replay]);
    }
  return out;
}

/** Each operation's view (null: it could not be read, e.g. pruned), by id. */
export async function callViews(
  env: Env,
  tenantId: string,
  operationIds: readonly string[],
): Promise<Map<string, OperationView>> {
  const views = await Promise.all(
    operationIds.map((id) =>
      operationStub(env, id)
        .get(tenantId, 0)
        .catch(() => null),
    ),
  );
  return new Map(
    views.flatMap((view) => (view?.ok ? [[view.value.operation_id, view.value]] : [])),
  );
}

const headerLines = (headers: Record<string, string>) =>
  Object.entries(headers).map(([name, value]) => `${name}: ${value}`);

export const CallDetail: FC<{
  view: OperationView;
  events: readonly TraceEvent[];
  replays: readonly Replay[];
}> = ({ view, events, replays }) => {
  const { redacted } = view;
  const decided = firstOf(events, "approval_decided");
  const resolved = firstOf(events, "resolved");
  const exchanges = eventsOf(events, "attempt_finished");
  return (
    <div class="call" data-role="call" data-operation={view.operation_id}>
      <Facts>
        <Fact
          label={view.shadow ? "Production target (a shadow run: never sent there)" : "Target"}
          mono
        >
          {redacted.target}
        </Fact>
        <Fact label="Arguments (frozen)">
          <pre data-role="arguments">{pretty(redacted.arguments)}</pre>
          {redacted.hidden.length > 0 && (
            <span class="hint">Hidden as [redacted]: {redacted.hidden.join(", ")}</span>
          )}
        </Fact>
        <Fact label="Idempotency key (every attempt sends it)" mono>
          {view.repeat_safety === "keyed"
            ? view.idempotency_key
            : "none (the tool takes no idempotency key)"}
        </Fact>
        <Fact label="The model got">
          <ModelGot view={view} />
        </Fact>
        {view.approval?.decided_by && (
          <Fact label={view.approval.state === "approved" ? "Approved by" : "Decided by"}>
            <span class="mono">{view.approval.decided_by}</span>{" "}
            <span class="hint" data-role="decided-via">
              [{viaText(view.approval.decided_via)}]
            </span>{" "}
            ({view.approval.state}
            {view.approval.decided_at ? `, ${utc(view.approval.decided_at)}` : ""})
            {view.approval.reason ? `: “${view.approval.reason}”` : ": no reason given"}
          </Fact>
        )}
        {!view.approval?.decided_by && decided && (
          <Fact label="Decided by">
            <span class="mono">{String(decided.by)}</span> ({String(decided.verdict)})
          </Fact>
        )}
        {resolved && (
          <Fact label="Settled by a person">
            <span class="mono">{String(resolved.by)}</span>: {String(resolved.outcome)}
            {typeof resolved.reason === "string" && resolved.reason
              ? ` — “${resolved.reason}”`
              : ""}
          </Fact>
        )}
        {view.compensates && (
          <Fact label="Compensates">
            <a
              class="mono"
              data-role="compensates"
              href={`/console/operations/${view.compensates}`}
            >
              {view.compensates}
            </a>
          </Fact>
        )}
        {view.compensated_by && (
          <Fact label="Compensated by">
            <a
              class="mono"
              data-role="compensated-by"
              href={`/console/operations/${view.compensated_by}`}
            >
              {view.compensated_by}
            </a>
          </Fact>
        )}
        {replays.length > 0 && (
          <Fact label="Replayed">
            <span data-role="replay">
              Answered from the stored outcome, nothing sent again:{" "}
              {replays.map((r) => `call ${r.call_id} (turn ${r.turn_id})`).join(", ")}
            </span>
          </Fact>
        )}
      </Facts>
      {exchanges.length > 0 && (
        <ol class="exchanges" aria-label={`Requests of ${view.tool}`}>
          {exchanges.map((event) => (
            <li>
              <Exchange event={event} />
            </li>
          ))}
        </ol>
      )}
    </div>
  );
};

const ModelGot: FC<{ view: OperationView }> = ({ view }) => {
  const { result } = view;
  if (result.status === "succeeded")
    return <pre data-role="result">{pretty(view.redacted.result)}</pre>;
  return (
    <span data-role="result">
      {result.status.replace(/_/g, " ")}
      {"code" in result && result.code ? (
        <>
          {" "}
          <code>{result.code}</code>
        </>
      ) : null}
      {"message" in result && result.message ? `: ${result.message}` : ""}
    </span>
  );
};

const Exchange: FC<{ event: TraceOf<"attempt_finished"> }> = ({ event }) => {
  const { request, response } = event;
  return (
    <>
      <b>Attempt {String(event.attempt)}</b>
      {request ? (
        <pre data-role="sent-request">
          {[
            `${request.method} ${request.url}`,
            ...headerLines(request.headers),
            ...(request.body !== null
              ? ["", request.body]
              : request.body_kept === false
                ? [
                    "",
                    "(body: the frozen arguments above; the tool does not opt in to keeping it in traces)",
                  ]
                : []),
          ].join("\n")}
        </pre>
      ) : (
        <p class="hint">
          No request was recorded for this attempt (none was sent, or toolgate stopped).
        </p>
      )}
      {response ? (
        <pre data-role="upstream-answer">
          {[
            `HTTP ${response.status}`,
            ...headerLines(response.headers),
            ...(response.snippet ? ["", response.snippet] : []),
          ].join("\n")}
        </pre>
      ) : (
        <p class="hint">No answer arrived ({event.observed.kind}).</p>
      )}
    </>
  );
};
