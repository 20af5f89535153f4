// The "decided" tab of the approvals inbox: one table row per decided request, newest first — the
// tool with its arguments as the trace shows them (redacted), how it ended, who decided, their
// reason, when, and the run. Who decided says how toolgate knows it (Access, key, session).
import type { Item } from "./approval-decision.ts";
import { pretty, utc, viaText } from "./format.ts";
import { Badge } from "./timeline.tsx";

export const DecidedTable = ({ items, cursor }: { items: Item[]; cursor: string | null }) =>
  items.length === 0 ? (
    <p class="empty">
      {cursor ? "No older decisions." : "No approval request has been decided yet."}
    </p>
  ) : (
    <table class="decided">
      <caption>Decided requests, newest first</caption>
      <thead>
        <tr>
          <th scope="col">Tool</th>
          <th scope="col">Outcome</th>
          <th scope="col">By</th>
          <th scope="col">Reason</th>
          <th scope="col">When</th>
          <th scope="col">Run</th>
        </tr>
      </thead>
      <tbody>
        {items.map((item) => (
          <tr data-operation={item.operation_id}>
            <td>
              <span class="mono">{item.tool}</span>
              <details>
                <summary>Arguments (as the trace shows them)</summary>
                <pre>
                  <code>{pretty(item.arguments)}</code>
                </pre>
              </details>
            </td>
            <td>
              <Badge status={item.state} />
            </td>
            <td>
              <span class="mono">{item.decided_by ?? "—"}</span>
              {item.decided_by && (
                <span class="hint" data-role="decided-via">
                  {" "}
                  [{viaText(item.decided_via)}]
                </span>
              )}
            </td>
            <td>{item.reason ?? "—"}</td>
            <td>
              {item.decided_at ? (
                <time datetime={item.decided_at}>{utc(item.decided_at)}</time>
              ) : (
                <span class="hint">asked {utc(item.requested_at)}</span>
              )}
            </td>
            <td>
              <a class="mono" href={`/console/runs/${item.run_id}#${item.operation_id}`}>
                {item.run_id}
              </a>
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
