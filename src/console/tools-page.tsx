// /console/tools (issue 20): each registered tool's idempotency verification verdict beside what
// the tenant index saw of it over 24 hours — calls, failure and unknown rates, p50/p95 latency —
// and the latency chart. Each tool row links to its recent operations (the home page filtered).
// Needs runs:read (the index) and tools:write (the registry, as GET /v1/tools does).
import type { Context } from "hono";
import { indexStub, tenantStub } from "../durable/stubs.ts";
import { LatencyChart } from "./charts.tsx";
import { problemPage, render } from "./layout.tsx";
import { consoleRoutes, definePage, type ConsoleEnv } from "./page.ts";
import { Badge } from "./timeline.tsx";

const DAY_MS = 24 * 60 * 60_000;
const pct = (rate: number) => `${(rate * 100).toFixed(rate > 0 && rate < 0.1 ? 1 : 0)} %`;

async function showTools(c: Context<ConsoleEnv>) {
  const session = c.get("session");
  if (!session.scopes.includes("runs:read"))
    return problemPage(c, 403, "Not allowed", "The tools page needs an API key with runs:read.");
  const [overview, registered] = await Promise.all([
    indexStub(c.env, session.tenantId).overview(Date.now() - DAY_MS),
    session.scopes.includes("tools:write")
      ? tenantStub(c.env, session.tenantId).listTools()
      : Promise.resolve(null),
  ]);
  const names = [
    ...new Set([...(registered ?? []).map((t) => t.name), ...overview.tools.map((t) => t.tool)]),
  ].sort();
  // The registry's answer as GET /v1/tools gives it (domain/verification.ts verificationView).
  const verdicts = new Map((registered ?? []).map((t) => [t.name, t.verification]));
  const stats = new Map(overview.tools.map((t) => [t.tool, t]));
  return render(
    c,
    "Tools",
    <>
      <p class="hint">
        <a href="/console">Home</a> › Tools
      </p>
      <h1>Tools</h1>
      <p class="lede">
        Each tool's verification verdict and what its calls did over the last 24 hours (from the
        tenant index, seconds behind). Latency is first attempt sent → recorded, retries included.
      </p>
      {registered === null && (
        <p class="notice">
          Verdicts need an API key with tools:write; calls and latency are shown.
        </p>
      )}
      <div class="scroll">
        <table class="tools">
          <caption>Tools, last 24 hours</caption>
          <thead>
            <tr>
              <th scope="col">Tool</th>
              <th scope="col">Verification</th>
              <th scope="col" class="num">
                Calls
              </th>
              <th scope="col" class="num">
                Failed
              </th>
              <th scope="col" class="num">
                Unknown
              </th>
              <th scope="col" class="num">
                p50
              </th>
              <th scope="col" class="num">
                p95
              </th>
            </tr>
          </thead>
          <tbody>
            {names.map((name) => {
              const s = stats.get(name);
              const verdict = verdicts.get(name);
              return (
                <tr id={`tool-${name}`} data-tool={name}>
                  <th scope="row" class="mono">
                    <a href={`/console?tool=${encodeURIComponent(name)}`}>{name}</a>
                  </th>
                  <td>
                    {verdict ? (
                      <>
                        <Badge status={verdict.status} />{" "}
                        <span class="hint">{verdict.summary}</span>
                      </>
                    ) : (
                      "not registered"
                    )}
                  </td>
                  <td class="num">{s?.calls ?? 0}</td>
                  <td class="num">{s ? pct(s.failure_rate) : "—"}</td>
                  <td class="num">{s ? pct(s.unknown_rate) : "—"}</td>
                  <td class="num">{s?.p50_ms == null ? "—" : `${s.p50_ms} ms`}</td>
                  <td class="num">{s?.p95_ms == null ? "—" : `${s.p95_ms} ms`}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      </div>
      <h2 id="latency-heading">Latency per tool</h2>
      <LatencyChart id="latency" tools={overview.tools} />
    </>,
  );
}

export const toolsPage = definePage({
  nav: { label: "Tools", href: "/console/tools" },
  routes: consoleRoutes().get("/tools", showTools),
});
