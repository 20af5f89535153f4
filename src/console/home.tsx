// The console's home: the overview (issue 20: queue counts, calls chart, recent operations and runs
// with search, from the tenant index; overview.tsx), a form to open a run by id (a GET: it only
// navigates), the way to the approval and unknown-outcome queues, and who is signed in.
import type { Context } from "hono";
import { RUN_ID } from "../http/request.ts";
import { render } from "./layout.tsx";
import { loadOverview, OverviewSections, type OverviewData } from "./overview.tsx";
import { consoleRoutes, definePage, type ConsoleEnv } from "./page.ts";

async function home(c: Context<ConsoleEnv>, error?: string, runId = "") {
  const session = c.get("session");
  const data: OverviewData | null = await loadOverview(c);
  return render(
    c,
    "Home",
    <>
      <h1>toolgate console</h1>
      <p class="lede">
        Follow what your agents did, decide what waits for a person, and settle outcomes toolgate
        could not prove.
      </p>
      <section aria-labelledby="open-run" class="panel">
        <h2 id="open-run">Open a run</h2>
        {error && (
          <div class="alert" role="alert" id="run-id-error">
            <p>{error}</p>
          </div>
        )}
        <form class="inline" method="get" action="/console/runs">
          <div>
            <label for="run_id">Run id</label>
            <input
              type="text"
              id="run_id"
              name="run_id"
              value={runId}
              placeholder="run_01…"
              required
              spellcheck={false}
              autocomplete="off"
              aria-describedby={error ? "run-id-error" : undefined}
            />
          </div>
          <button type="submit">Open run</button>
        </form>
      </section>
      {data ? (
        <OverviewSections data={data} />
      ) : (
        <>
          <h2>Queues</h2>
          <p class="hint">Counts, charts and search need an API key with the scope runs:read.</p>
          <div class="grid">
            <section class="card" aria-labelledby="q-approvals">
              <h2 id="q-approvals">
                <a href="/console/approvals">Pending approvals</a>
              </h2>
              <p>
                Calls waiting for a person to approve or reject them, with their exact frozen
                arguments.
              </p>
            </section>
            <section class="card" aria-labelledby="q-unknown">
              <h2 id="q-unknown">
                <a href="/console/unknown-outcomes">Unknown outcomes</a>
              </h2>
              <p>
                Writes that may or may not have happened upstream, waiting to be reconciled or
                resolved.
              </p>
            </section>
          </div>
        </>
      )}
      <p class="hint" data-incident>
        In an incident: <a href="/console/freezes">Freezes</a> stop calls of the tenant, a tool, an
        upstream, a user or a run now; a waiting call's page has Pause, Resume and Retry now.
      </p>
      <h2>This session</h2>
      <dl class="facts">
        <dt>Tenant</dt>
        <dd class="mono">{session.tenantId}</dd>
        <dt>API key</dt>
        <dd>
          {session.keyName} (<span class="mono">{session.keyId}</span>)
        </dd>
        <dt>Scopes</dt>
        <dd>{session.scopes.length > 0 ? session.scopes.join(", ") : "none"}</dd>
        <dt>Session ends</dt>
        <dd>
          <time datetime={new Date(session.expiresAtMs).toISOString()}>
            {new Date(session.expiresAtMs).toISOString().replace("T", " ").slice(0, 19)} UTC
          </time>
        </dd>
      </dl>
    </>,
    error ? 400 : 200,
    // The queue counts stay current without script: the page reloads itself every minute.
    data ? { refreshSeconds: 60 } : undefined,
  );
}

export const homePage = definePage({
  nav: { label: "Home", href: "/console" },
  routes: consoleRoutes()
    .get("/", (c) => home(c))
    .get("/runs", (c) => {
      const runId = (c.req.query("run_id") ?? "").trim();
      if (!RUN_ID.test(runId))
        return home(c, "A run id looks like run_ followed by 26 letters and digits.", runId);
      return c.redirect(`/console/runs/${runId}`, 303);
    }),
});
