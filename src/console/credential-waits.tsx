// Calls waiting for their end user to connect (issue 36), a section of the approvals page: the
// tenant's credential.required events of the last CREDENTIAL_WAIT_MS (every such wait ends within
// it), each operation asked so that only what still waits is shown, with the link the model was
// given to pass on. Nothing here reads a token: the operation's answer never carries one.
import type { Env } from "../durable/env.ts";
import { operationStub, tenantStub } from "../durable/stubs.ts";
import { CREDENTIAL_WAIT_MS } from "../domain/operation/credential.ts";
import { utc } from "./format.ts";

const LIST_LIMIT = 50;

export type CredentialWait = {
  operation_id: string;
  tool: string;
  user: string;
  provider: string;
  reason: string;
  since_ms: number;
  connect_url: string | null;
};

/** The calls still waiting (the oldest first, at most 50); unanswered questions show nothing. */
export async function credentialWaits(env: Env, tenantId: string): Promise<CredentialWait[]> {
  const page = await tenantStub(env, tenantId)
    .listEvents({
      since: { atMs: Date.now() - CREDENTIAL_WAIT_MS },
      type: "credential.required",
      limit: LIST_LIMIT,
    })
    .catch(() => null);
  if (!page?.ok) return [];
  const latest = new Map(page.value.events.map((event) => [event.operation_id!, event]));
  const asked = await Promise.all(
    [...latest.values()].map(async (event) => {
      const view = await operationStub(env, event.operation_id!)
        .get(tenantId, 0)
        .catch(() => null);
      // The events lag the operation by a moment, and a wait ends: show only what still waits.
      if (!view?.ok || view.value.phase !== "awaiting_credential") return null;
      const data = event.data as { user: string; provider: string; reason: string };
      const result = view.value.result;
      return {
        operation_id: event.operation_id!,
        tool: view.value.tool,
        user: data.user,
        provider: data.provider,
        reason: data.reason,
        since_ms: event.at_ms,
        connect_url: "connect_url" in result ? (result.connect_url ?? null) : null,
      };
    }),
  );
  return asked.filter((item): item is CredentialWait => item !== null);
}

export const CredentialWaits = ({ items }: { items: CredentialWait[] }) =>
  items.length === 0 ? null : (
    <section aria-label="Waiting for a user to connect" data-list="credential-waits">
      <h2>Waiting for a user to connect</h2>
      <p class="lede">
        Nothing was sent: each call acts as its user, who must connect their account first. Give
        them the link; the call then continues by itself.
      </p>
      <table>
        <thead>
          <tr>
            <th>Call</th>
            <th>User</th>
            <th>Provider</th>
            <th>Why</th>
            <th>Since</th>
            <th>Link</th>
          </tr>
        </thead>
        <tbody>
          {items.map((item) => (
            <tr id={item.operation_id} data-operation={item.operation_id}>
              <td>
                <a href={`/console/operations/${item.operation_id}`}>{item.tool}</a>
              </td>
              <td class="mono">{item.user}</td>
              <td class="mono">{item.provider}</td>
              <td>{item.reason}</td>
              <td>{utc(item.since_ms)}</td>
              <td>{item.connect_url ? <a href={item.connect_url}>connect</a> : "—"}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
