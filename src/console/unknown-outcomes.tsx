// /console/unknown-outcomes: writes whose outcome toolgate could not prove and has no automatic way
// left to settle (TenantObject.listUnknowns), each with its attempts and what the upstream said
// (from the operation's own log), and a form for a person's verdict: it happened (optionally with
// the result the agent should get), it did not, or — keyed tools only — send it again with the
// same idempotency key. Needs operations:resolve, for GET and POST. A form that does not parse is
// shown again with its values and the error (400); a verdict taken redirects with a flash (303).
import type { Context } from "hono";
import type { TraceEvent } from "../domain/operation/index.ts";
import type { OperationView } from "../durable/operation-object.ts";
import { operationStub, tenantStub } from "../durable/stubs.ts";
import { toApiError } from "../http/problem.ts";
import { OPERATION_ID } from "../http/request.ts";
import { setFlash, takeFlash, type Flash } from "./flash.ts";
import { ago, pretty, utc } from "./format.ts";
import { FlashBox, problemPage, render } from "./layout.tsx";
import { consoleRoutes, definePage, type ConsoleEnv } from "./page.ts";
import { Badge } from "./timeline.tsx";

const HOME = "/console/unknown-outcomes";
const LIST_LIMIT = 50;
const MAX_REASON = 2000;
const OUTCOMES = ["succeeded", "failed", "resend"] as const;
type Outcome = (typeof OUTCOMES)[number];
type Waiting = {
  operation_id: string;
  run_id: string;
  tool: string;
  since: string;
  view: OperationView;
  events: TraceEvent[];
};
/** A form that did not parse: shown again on its own card with what the person typed. */
type FormState = {
  operationId: string;
  error: string;
  outcome: string;
  result: string;
  reason: string;
};

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
  const csrf = c.get("session").csrf;
  const nowMs = Date.now();
  return render(
    c,
    "Unknown outcomes",
    <>
      <h1>Unknown outcomes</h1>
      <p class="lede">
        Writes that may or may not have happened upstream, and that toolgate cannot settle by
        itself. Check the upstream system, then record what happened: the agent gets exactly that
        answer.
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
          />
        ))
      )}
    </>,
    form ? 400 : 200,
  );
}

const SAFETY_TEXT: Record<OperationView["repeat_safety"], string> = {
  keyed:
    "The tool deduplicates by idempotency key: sending it again with the same key cannot repeat the effect.",
  lookup:
    "The tool has a status lookup, but it gave no clear answer. It has no idempotency key, so toolgate will not send it again.",
  neither:
    "The tool has no idempotency key and no status lookup: only the upstream system can tell. toolgate will not send it again.",
  read: "A read: it changed nothing upstream.",
};

const UnknownCard = ({
  item,
  csrf,
  nowMs,
  form,
}: {
  item: Waiting;
  csrf: string;
  nowMs: number;
  form: FormState | null;
}) => {
  const id = item.operation_id;
  const { view } = item;
  const code = view.result.status === "succeeded" ? null : view.result.code;
  return (
    <article class="item" id={id} aria-labelledby={`${id}-title`} data-operation={id}>
      <header>
        <h2 id={`${id}-title`}>{item.tool}</h2>
        <Badge status="outcome_unknown" />
        {code && <code>{code}</code>}
      </header>
      <div class="item-body">
        <dl class="facts">
          <dt>Run</dt>
          <dd>
            <a class="mono" href={`/console/runs/${item.run_id}#${id}`}>
              {item.run_id}
            </a>
          </dd>
          <dt>Waiting since</dt>
          <dd>
            <time datetime={item.since}>{utc(item.since)}</time>{" "}
            <span class="hint">({ago(Date.parse(item.since), nowMs)})</span>
          </dd>
          <dt>Operation</dt>
          <dd class="mono">{id}</dd>
          <dt>Idempotency key</dt>
          <dd class="mono">{view.idempotency_key}</dd>
          <dt>Sending again</dt>
          <dd>{SAFETY_TEXT[view.repeat_safety]}</dd>
        </dl>
        <h3>Attempts and what the upstream said</h3>
        <Attempts events={item.events} />
        <ResolveForm item={item} csrf={csrf} form={form} />
      </div>
    </article>
  );
};

type AttemptRow = {
  attempt: number;
  sentAtMs: number | null;
  answeredAtMs: number | null;
  observed: Record<string, unknown> | null;
};

/** One row per attempt from the log; an attempt with no answer recorded says so (a crash or a hang). */
export function attemptRows(events: TraceEvent[]): AttemptRow[] {
  const rows = new Map<number, AttemptRow>();
  for (const event of events) {
    if (event.type !== "attempt_started" && event.type !== "attempt_finished") continue;
    const attempt = Number(event.attempt);
    const row = rows.get(attempt) ?? {
      attempt,
      sentAtMs: null,
      answeredAtMs: null,
      observed: null,
    };
    if (event.type === "attempt_started") row.sentAtMs = event.at_ms;
    else {
      row.answeredAtMs = event.at_ms;
      row.observed =
        event.observed && typeof event.observed === "object"
          ? (event.observed as Record<string, unknown>)
          : null;
    }
    rows.set(attempt, row);
  }
  return [...rows.values()].sort((a, b) => a.attempt - b.attempt);
}

/** What the upstream said, in words; the raw kind, status and detail are shown next to it. */
export function upstreamSaid(observed: Record<string, unknown> | null): string {
  if (!observed) return "No answer was recorded (toolgate stopped while the request was out).";
  switch (observed.kind) {
    case "ok":
      return "Answered 2xx with a valid result.";
    case "http_error":
      return `Answered HTTP ${String(observed.status)}.`;
    case "timeout":
      return "No answer before the timeout; the request had been sent.";
    case "connection_lost":
      return "The connection broke after the request may have been sent.";
    case "crash":
      return "toolgate stopped mid-attempt; the request may have been sent.";
    case "body_lost":
      return "Answered 2xx, but the body was lost.";
    default:
      return `Observed ${String(observed.kind)}.`;
  }
}

const Attempts = ({ events }: { events: TraceEvent[] }) => {
  const rows = attemptRows(events);
  const lookups = events.filter((event) => event.type === "reconcile_finished");
  if (rows.length === 0) return <p class="empty">No attempt is recorded.</p>;
  return (
    <>
      <table class="attempts">
        <thead>
          <tr>
            <th scope="col" class="num">
              Attempt
            </th>
            <th scope="col">Sent</th>
            <th scope="col">Answered</th>
            <th scope="col">What the upstream said</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((row) => (
            <tr data-attempt={String(row.attempt)}>
              <td class="num">{String(row.attempt)}</td>
              <td>
                {row.sentAtMs === null ? (
                  "—"
                ) : (
                  <time datetime={new Date(row.sentAtMs).toISOString()}>{utc(row.sentAtMs)}</time>
                )}
              </td>
              <td>
                {row.answeredAtMs === null ? (
                  "—"
                ) : (
                  <time datetime={new Date(row.answeredAtMs).toISOString()}>
                    {utc(row.answeredAtMs)}
                  </time>
                )}
              </td>
              <td>
                {upstreamSaid(row.observed)}
                {row.observed && (
                  <span class="observed">
                    {" "}
                    <span class="kv">
                      <b>kind</b> <code>{String(row.observed.kind)}</code>
                    </span>
                    {row.observed.status !== undefined && row.observed.status !== null && (
                      <span class="kv">
                        <b>status</b> <code>{String(row.observed.status)}</code>
                      </span>
                    )}
                    {typeof row.observed.detail === "string" && (
                      <span class="kv">
                        <b>detail</b> {row.observed.detail}
                      </span>
                    )}
                  </span>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {lookups.length > 0 && (
        <p class="hint">
          Status lookups:{" "}
          {lookups.map((event) => `${utc(event.at_ms)} → ${String(event.found)}`).join("; ")}.
        </p>
      )}
    </>
  );
};

const ResolveForm = ({
  item,
  csrf,
  form,
}: {
  item: Waiting;
  csrf: string;
  form: FormState | null;
}) => {
  const id = item.operation_id;
  const keyed = item.view.repeat_safety === "keyed";
  const choices: Array<{ value: Outcome; label: string; hint: string }> = [
    {
      value: "succeeded",
      label: "It happened (succeeded)",
      hint: "The agent is told it succeeded, with the result below.",
    },
    {
      value: "failed",
      label: "It did not happen (failed)",
      hint: "The agent is told it did not happen and must not retry.",
    },
    ...(keyed
      ? [
          {
            value: "resend" as const,
            label: "Send it again with the same idempotency key",
            hint: "Safe only because the upstream deduplicates this key.",
          },
        ]
      : []),
  ];
  const errorId = `${id}-error`;
  return (
    <form
      method="post"
      action={`${HOME}/${id}/resolve`}
      class="stack resolve"
      aria-label={`Resolve ${item.tool}`}
      aria-describedby={form ? errorId : undefined}
    >
      <input type="hidden" name="csrf" value={csrf} />
      {form && (
        <div class="alert" role="alert" id={errorId}>
          <p>{form.error}</p>
        </div>
      )}
      <fieldset>
        <legend>What happened upstream?</legend>
        {choices.map((choice) => (
          <div class="choice">
            <input
              type="radio"
              id={`${id}-${choice.value}`}
              name="outcome"
              value={choice.value}
              required
              checked={form?.outcome === choice.value}
              aria-describedby={`${id}-${choice.value}-hint`}
            />
            <label for={`${id}-${choice.value}`}>{choice.label}</label>
            <p class="hint" id={`${id}-${choice.value}-hint`}>
              {choice.hint}
            </p>
          </div>
        ))}
      </fieldset>
      <div>
        <label for={`${id}-result`}>Result (JSON)</label>
        <p class="hint" id={`${id}-result-hint`}>
          Only with "It happened": what the agent should receive, e.g. the id the upstream system
          shows. Leave empty for none.
        </p>
        <textarea
          id={`${id}-result`}
          name="result"
          rows={3}
          class="mono"
          spellcheck={false}
          aria-describedby={`${id}-result-hint`}
        >
          {form?.result ?? ""}
        </textarea>
      </div>
      <div>
        <label for={`${id}-reason`}>Reason</label>
        <p class="hint" id={`${id}-reason-hint`}>
          Required: how you know. Recorded with your name in the operation's log.
        </p>
        <textarea
          id={`${id}-reason`}
          name="reason"
          rows={2}
          maxlength={MAX_REASON}
          required
          aria-describedby={`${id}-reason-hint`}
        >
          {form?.reason ?? ""}
        </textarea>
      </div>
      <div>
        <button type="submit">Record verdict</button>
      </div>
    </form>
  );
};

type Parsed =
  { ok: true; outcome: Outcome; result: unknown; reason: string } | { ok: false; error: string };

/** The verdict form, checked: a known outcome, a reason, and a result only with "succeeded", as JSON. */
export function parseVerdict(form: { outcome: string; result: string; reason: string }): Parsed {
  const outcome = OUTCOMES.find((value) => value === form.outcome);
  if (!outcome) return { ok: false, error: "Choose what happened upstream. Nothing was recorded." };
  const reason = form.reason.trim();
  if (!reason)
    return { ok: false, error: "A verdict needs a reason (how you know). Nothing was recorded." };
  if (reason.length > MAX_REASON)
    return {
      ok: false,
      error: `A reason is at most ${MAX_REASON} characters. Nothing was recorded.`,
    };
  const text = form.result.trim();
  if (!text) return { ok: true, outcome, result: null, reason };
  if (outcome !== "succeeded")
    return {
      ok: false,
      error:
        'A result goes only with "It happened (succeeded)". Clear it or choose succeeded. Nothing was recorded.',
    };
  try {
    return { ok: true, outcome, result: JSON.parse(text), reason };
  } catch (error) {
    return {
      ok: false,
      error: `The result is not valid JSON (${error instanceof Error ? error.message : String(error)}). Nothing was recorded.`,
    };
  }
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
