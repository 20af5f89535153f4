// One pending approval request as a card: what will run — the tool, its target, who asked and
// when, when it expires, the arguments read from the operation itself (the inbox copy is redacted
// like the trace; fields the tool hides are named) and the preview — then the decide forms, unless
// it has expired, and the input hash and tool version the forms are bound to.
import { describeSubject } from "../domain/limit/claims.ts";
import type { NotificationState } from "../durable/tenant/notifications.ts";
import type { ApprovalInput } from "../durable/operation/contracts.ts";
import type { Item } from "./approval-decision.ts";
import { BatchSelect } from "./approval-batch.tsx";
import { EditedFact, EditForm, VotesFact, type EditDraft } from "./approval-edit.tsx";
import { DecideForms } from "./approval-forms.tsx";
import { Fact, Facts, RunFact, TimeFact } from "./facts.tsx";
import { expiresIn, notificationText, pretty, splitTarget } from "./format.ts";
import { Badge } from "./timeline.tsx";

export const PendingCard = ({
  item,
  exact,
  notified,
  csrf,
  nowMs,
  draft,
}: {
  item: Item;
  exact: ApprovalInput | null;
  /** A previewed edit of this card (approval-edit.tsx): its form re-rendered open, with the difference. */
  draft?: EditDraft | undefined;
  /** From the webhook delivery log; null when the tenant could not answer. */
  notified: NotificationState | null;
  csrf: string;
  nowMs: number;
}) => {
  const id = item.operation_id;
  const target = splitTarget(exact?.target ?? item.target);
  const expiry = expiresIn(Date.parse(item.expires_at), nowMs);
  return (
    <article class="item" id={id} aria-labelledby={`${id}-title`} data-operation={id}>
      <header>
        <h2 id={`${id}-title`}>{item.tool}</h2>
        <Badge status="awaiting_approval" />
        {item.compensates && <span class="chip">undo of {item.compensates}</span>}
        <span class={expiry.expired ? "chip expired" : "chip"}>{expiry.text}</span>
      </header>
      <div class="item-body">
        <Facts>
          <Fact label="Target">
            {target.method && <code class="method">{target.method}</code>} <code>{target.url}</code>
          </Fact>
          {item.payment && (
            <Fact label="Payment">
              <span data-role="payment">
                {item.payment.amount} (atomic units) of <code>{item.payment.asset}</code> on{" "}
                <code>{item.payment.network}</code> to <code>{item.payment.pay_to}</code>: approving
                signs exactly this payment
              </span>
            </Fact>
          )}
          {notified && <Fact label="Notification">{notificationText(notified)}</Fact>}
          <Fact label="Asked by">
            <span class="mono">{item.requested_by}</span> <span class="hint">(the run's user)</span>
          </Fact>
          <RunFact runId={item.run_id} operationId={id} />
          <TimeFact label="Requested" at={item.requested_at} />
          <TimeFact label="Expires" at={item.expires_at} hint={expiry.text} />
          {item.route && <VotesFact route={item.route} />}
          {exact?.edited && <EditedFact edited={exact.edited} />}
          <Fact label="Operation" mono>
            {id}
          </Fact>
          {exact?.limits?.map((l) => (
            <Fact label={`Limit ${l.name}`}>
              <span data-role="limit-usage">
                {l.usage
                  ? `${l.usage.used} of ${l.usage.max} used for ${describeSubject(l.subject)} in the window (this call: ${l.amount}, counted), ${l.usage.remaining} remains`
                  : `usage for ${describeSubject(l.subject)} could not be read just now (this call: ${l.amount})`}
              </span>
            </Fact>
          ))}
          {exact?.cedar && (
            <Fact label="Policy set">
              <span data-role="policy-decision">
                {exact.cedar.decision} by {exact.cedar.policies.join(", ") || "no policy"} (
                <span class="mono">{exact.cedar.version}</span>)
              </span>
            </Fact>
          )}
        </Facts>
        <Arguments item={item} exact={exact} />
        <h3 id={`${id}-preview`}>Preview</h3>
        <Preview preview={item.preview} labelledBy={`${id}-preview`} />
        {expiry.expired ? (
          <p class="alert">
            This request has expired. Nothing was sent; toolgate records it as expired and tells the
            agent.
          </p>
        ) : (
          <>
            {/* Only what the approver sees exactly may be decided in a batch. */}
            {exact && <BatchSelect item={item} />}
            <DecideForms item={item} csrf={csrf} challenge={exact?.step_up?.challenge ?? null} />
            {/* Editing needs the exact arguments; a step-up tool's edit is approved with the passkey after. */}
            {exact && <EditForm item={item} exact={exact} csrf={csrf} draft={draft} />}
          </>
        )}
        <p class="hint fingerprint">
          Bound to input hash <span class="mono">{item.input_hash}</span> and tool version{" "}
          <span class="mono">{item.policy_version}</span>
          {item.approval_hash !== item.input_hash && (
            <>
              {" "}
              and this payment (approval hash <span class="mono">{item.approval_hash}</span>)
            </>
          )}
          .
        </p>
      </div>
    </article>
  );
};

/**
 * The arguments as they will be sent (read from the operation, hidden fields named), or — when the
 * operation could not answer — the inbox's redacted copy with a warning to reload before approving.
 */
const Arguments = ({ item, exact }: { item: Item; exact: ApprovalInput | null }) => {
  const id = item.operation_id;
  return exact ? (
    <>
      <h3 id={`${id}-args`}>Arguments, as they will be sent</h3>
      <pre aria-labelledby={`${id}-args`} data-role="arguments">
        <code>{pretty(exact.arguments)}</code>
      </pre>
      {exact.hidden.length > 0 && (
        <p class="hint" data-role="hidden-fields">
          Hidden from traces, logs and exports (shown here because you decide):{" "}
          {exact.hidden.map((pointer, i) => (
            <>
              {i > 0 && ", "}
              <code>{pointer}</code>
            </>
          ))}
        </p>
      )}
    </>
  ) : (
    <>
      <h3 id={`${id}-args`}>Arguments, as the trace shows them</h3>
      <p class="alert" data-role="arguments-unavailable">
        toolgate could not read this call's arguments from the operation just now, so fields the
        tool hides from traces show as [redacted]. Reload before you approve.
      </p>
      <pre aria-labelledby={`${id}-args`} data-role="arguments">
        <code>{pretty(item.arguments)}</code>
      </pre>
    </>
  );
};

const Preview = ({ preview, labelledBy }: { preview: Item["preview"]; labelledBy: string }) => {
  if (!preview) return <p class="empty">No preview for this call.</p>;
  return (
    <div class="preview">
      <p>
        {preview.status === null ? (
          "The preview request got no answer"
        ) : (
          <>
            The tool answered <code>HTTP {String(preview.status)}</code>
          </>
        )}
        {preview.detail && <>: {preview.detail}</>}
      </p>
      {preview.body !== null && (
        <pre aria-labelledby={labelledBy} data-role="preview">
          <code>{pretty(preview.body)}</code>
        </pre>
      )}
    </div>
  );
};
