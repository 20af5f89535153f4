// The console's overview (issue 20), on the home page: the two queues with live counts, calls per
// 5 minutes by outcome, and recent operations and runs with filters and a search box (run id,
// operation id, user or subject such as a customer id). Everything comes from the tenant index
// (eventually consistent, seconds behind) and links on: operation → its run's timeline, approval
// and unknown-outcome queues, tool → the tools page. Needs runs:read.
import type { Context } from "hono";
import type { FC } from "hono/jsx";
import { OP_STATUSES } from "../domain/index-feed.ts";
import type { Overview } from "../durable/index/overview.ts";
import type { OpItem, RunItem } from "../durable/index/queries.ts";
import { indexStub } from "../durable/stubs.ts";
import { CallsChart } from "./charts.tsx";
import type { ConsoleEnv } from "./page.ts";
import { actionFor, Badge } from "./timeline.tsx";

const HOURS = 6;
const LIMIT = 25;

export type OverviewData = {
  overview: Overview;
  operations: OpItem[];
  runs: RunItem[];
  filters: { q: string; status: string; tool: string; user: string };
  nowMs: number;
};

/** null: the key cannot read runs (the home page then says so). */
export async function loadOverview(c: Context<ConsoleEnv>): Promise<OverviewData | null> {
  const session = c.get("session");
  if (!session.scopes.includes("runs:read")) return null;
  const pick = (name: string) => (c.req.query(name) ?? "").trim().slice(0, 200);
  const filters = { q: pick("q"), status: pick("status"), tool: pick("tool"), user: pick("user") };
  const status = (OP_STATUSES as readonly string[]).includes(filters.status)
    ? filters.status
    : undefined;
  if (!status) filters.status = "";
  const nowMs = Date.now();
  const index = indexStub(c.env, session.tenantId);
  const query = {
    limit: LIMIT,
    ...(filters.q ? { q: filters.q } : {}),
    ...(status ? { status } : {}),
    ...(filters.tool ? { tool: filters.tool } : {}),
    ...(filters.user ? { user: filters.user } : {}),
  };
  const [overview, operations, runs] = await Promise.all([
    index.overview(nowMs - HOURS * 3_600_000),
    index.listOperations(query),
    index.listRuns({
      limit: 10,
      ...(filters.q ? { q: filters.q } : {}),
      ...(filters.user ? { user: filters.user } : {}),
      ...(filters.tool ? { tool: filters.tool } : {}),
    }),
  ]);
  return {
    overview,
    operations: operations?.items ?? [],
    runs: runs?.items ?? [],
    filters,
    nowMs,
  };
}

const time = (iso: string) => <time datetime={iso}>{iso.replace("T", " ").slice(5, 19)}</time>;

const actionOf = (op: OpItem) => actionFor(op.status, op.operation_id);

/** One of the two queues a person works from: its live count, linked to its page. */
const QueueCard: FC<{
  id: string;
  href: string;
  title: string;
  status: string;
  count: number;
  about: string;
}> = ({ id, href, title, status, count, about }) => (
  <section class="card" aria-labelledby={id}>
    <h2 id={id}>
      <a href={href}>{title}</a>
    </h2>
    <p class="count" data-count={status}>
      {count}
    </p>
    <p>{about}</p>
  </section>
);

export const OverviewSections: FC<{ data: OverviewData }> = ({ data }) => {
  const { overview, filters } = data;
  const tools = overview.tools.map((t) => t.tool);
  return (
    <>
      <h2 id="queues-title">Queues</h2>
      <div class="grid" aria-labelledby="queues-title">
        <QueueCard
          id="q-approvals"
          href="/console/approvals"
          title="Pending approvals"
          status="awaiting_approval"
          count={overview.queues.awaiting_approval}
          about="Calls waiting for a person to approve or reject them."
        />
        <QueueCard
          id="q-unknown"
          href="/console/unknown-outcomes"
          title="Unknown outcomes"
          status="outcome_unknown"
          count={overview.queues.outcome_unknown}
          about="Writes that may or may not have happened upstream."
        />
        <section class="card" aria-labelledby="q-runs">
          <h2 id="q-runs">Last {HOURS} hours</h2>
          <p class="count">{Object.values(overview.operations).reduce((a, b) => a + b, 0)}</p>
          <p>
            live calls in {overview.runs} {overview.runs === 1 ? "run" : "runs"} ·{" "}
            <a href="/console/tools">tools</a>
          </p>
        </section>
        <ShadowCard shadow={overview.shadow} />
      </div>
      <p class="hint">
        Counts come from the tenant index, a few seconds behind the operations; this page refreshes
        every minute.
      </p>
      <h2 id="calls-heading">Live calls</h2>
      <CallsChart
        id="calls"
        slots={overview.series.map((s) => ({ atMs: Date.parse(s.at), by: s.by_status }))}
        fromMs={data.nowMs - HOURS * 3_600_000}
        toMs={data.nowMs}
      />
      <h2 id="search-title">Recent operations</h2>
      <form
        class="inline filters"
        method="get"
        action="/console"
        role="search"
        aria-labelledby="search-title"
      >
        <div>
          <label for="q">Search</label>
          <input
            type="text"
            id="q"
            name="q"
            value={filters.q}
            placeholder="run id, operation id, user, cus_42…"
            spellcheck={false}
            autocomplete="off"
          />
        </div>
        <div>
          <label for="status">Status</label>
          <select id="status" name="status">
            <option value="">any</option>
            {OP_STATUSES.map((s) => (
              <option value={s} selected={filters.status === s}>
                {s.replace(/_/g, " ")}
              </option>
            ))}
          </select>
        </div>
        <div>
          <label for="tool">Tool</label>
          <select id="tool" name="tool">
            <option value="">any</option>
            {tools.map((t) => (
              <option value={t} selected={filters.tool === t}>
                {t}
              </option>
            ))}
          </select>
        </div>
        <div>
          <label for="user">User</label>
          <input type="text" id="user" name="user" value={filters.user} autocomplete="off" />
        </div>
        <button type="submit">Filter</button>
        {(filters.q || filters.status || filters.tool || filters.user) && (
          <a href="/console">Clear</a>
        )}
      </form>
      {data.operations.length === 0 ? (
        <p class="empty">No operation matches.</p>
      ) : (
        <div class="scroll">
          <table class="operations">
            <caption>
              {data.operations.length === 1
                ? "The most recent operation"
                : `${data.operations.length} most recent operations`}
              {filters.q ? ` matching “${filters.q}”` : ""}
            </caption>
            <thead>
              <tr>
                <th scope="col">Created (UTC)</th>
                <th scope="col">Tool</th>
                <th scope="col">Status</th>
                <th scope="col">User</th>
                <th scope="col">Subjects</th>
                <th scope="col" class="num">
                  Attempts
                </th>
                <th scope="col" class="num">
                  Latency
                </th>
                <th scope="col">Operation</th>
              </tr>
            </thead>
            <tbody>
              {data.operations.map((op) => {
                const action = actionOf(op);
                return (
                  <tr data-operation={op.operation_id}>
                    <td>{time(op.created_at)}</td>
                    <td>
                      <a href={`/console/tools#tool-${op.tool}`}>{op.tool}</a>
                    </td>
                    <td>
                      <Badge status={op.status} /> {op.code && <code>{op.code}</code>}
                      {action && (
                        <>
                          {" "}
                          <a href={action.href}>{action.label}</a>
                        </>
                      )}
                    </td>
                    <td>{op.user ?? "—"}</td>
                    <td class="mono">
                      {Object.entries(op.subjects)
                        .map(([k, v]) => `${k}=${v}`)
                        .join(" ")}
                    </td>
                    <td class="num">{op.attempts ?? "—"}</td>
                    <td class="num">{op.latency_ms === null ? "—" : `${op.latency_ms} ms`}</td>
                    <td class="mono">
                      <a href={`/console/runs/${op.run_id}#${op.operation_id}`}>
                        {op.operation_id.slice(0, 15)}…
                      </a>
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
      <h2 id="runs-title">Recent runs</h2>
      {data.runs.length === 0 ? (
        <p class="empty">No run matches.</p>
      ) : (
        <div class="scroll">
          <table class="runs" aria-labelledby="runs-title">
            <thead>
              <tr>
                <th scope="col">Created (UTC)</th>
                <th scope="col">Run</th>
                <th scope="col">User</th>
                <th scope="col">Status</th>
                <th scope="col">Operations</th>
              </tr>
            </thead>
            <tbody>
              {data.runs.map((run) => (
                <tr data-run={run.run_id}>
                  <td>{time(run.created_at)}</td>
                  <td class="mono">
                    <a href={`/console/runs/${run.run_id}`}>{run.run_id}</a>
                  </td>
                  <td>{run.user ?? "—"}</td>
                  <td>
                    <Badge status={run.status} />
                  </td>
                  <td>
                    {Object.entries(run.operations).map(([status, n]) => (
                      <>
                        <Badge status={status} /> {n}{" "}
                      </>
                    ))}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </>
  );
};

/** Shadow runs' calls (issue 33): counted apart, in no live chart or per-tool figure. */
const ShadowCard = ({ shadow }: { shadow: Overview["shadow"] }) => {
  const calls = Object.values(shadow.operations).reduce((a, b) => a + b, 0);
  return (
    <section class="card" aria-labelledby="q-shadow" data-role="shadow-calls">
      <h2 id="q-shadow">Shadow calls</h2>
      <p class="count">{String(calls)}</p>
      <p>
        reached no production system; not in the live figures
        {shadow.tools.length > 0
          ? `: ${shadow.tools.map((t) => `${t.tool} ${t.calls}`).join(", ")}`
          : ""}
        .
      </p>
    </section>
  );
};
