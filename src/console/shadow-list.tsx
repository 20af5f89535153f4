// A shadow run's "would have sent" list (issue 22): for each write of the run, the production
// request it would have sent (secrets by name, hidden arguments scrubbed: the operation's own view,
// GET /v1/operations/{id}), and where it went instead. Read only for a shadow run's page.
import type { FC } from "hono/jsx";
import type { Env } from "../durable/env.ts";
import type { OperationView } from "../durable/operation/contracts.ts";
import { operationStub } from "../durable/stubs.ts";
import { firstOf } from "../domain/journal/trace-event.ts";
import type { OperationTimeline } from "./timeline.tsx";

/** The views of the run's shadow writes (marked by their `validated` trace event), in trace order. */
export async function shadowWrites(
  env: Env,
  tenantId: string,
  operations: readonly OperationTimeline[],
): Promise<OperationView[]> {
  const shadowed = operations.filter((op) => firstOf(op.events, "validated")?.shadow === true);
  const views = await Promise.all(
    shadowed.map((op) =>
      operationStub(env, op.operationId)
        .get(tenantId, 0)
        .catch(() => null),
    ),
  );
  return views.flatMap((view) => (view?.ok ? [view.value] : []));
}

export const WouldHaveSent: FC<{ views: OperationView[] }> = ({ views }) => (
  <section aria-labelledby="shadow-title">
    <h2 id="shadow-title">Would have sent</h2>
    <p class="hint">
      A shadow run: nothing below reached production. Each write went to its tool's sandbox (or was
      answered by its fixed sandbox result). Secrets are shown by name only.
    </p>
    {views.length === 0 ? (
      <p>No write yet.</p>
    ) : (
      <ol aria-label="Would have sent" data-role="would-have-sent">
        {views.map((view) => {
          const sent = view.would_have_sent;
          return (
            <li>
              <span class="mono">{view.tool}</span> · {view.result.status} ·{" "}
              <a class="mono" href={`#${view.operation_id}`}>
                {view.operation_id}
              </a>
              {sent && "error" in sent ? (
                <p>The request could not be built: {sent.error}</p>
              ) : sent ? (
                <pre data-role="request">
                  {`${sent.method} ${sent.url}\n${Object.entries(sent.headers)
                    .map(([name, value]) => `${name}: ${value}`)
                    .join("\n")}${sent.body === null ? "" : `\n\n${sent.body}`}`}
                </pre>
              ) : null}
            </li>
          );
        })}
      </ol>
    )}
  </section>
);
