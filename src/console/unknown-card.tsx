// One unknown outcome as a card: the tool and its error code, the facts (run, how long it has
// waited, operation, target and redacted arguments, the idempotency key when the tool is sent one,
// whether sending it again is safe), its attempts and what the
// upstream said, and the verdict form. `form` is set only on the card whose form did not parse.
import type { TraceEvent } from "../domain/operation/index.ts";
import type { OperationView } from "../durable/operation/contracts.ts";
import type { NotificationState } from "../durable/tenant/notifications.ts";
import { Attempts } from "./attempts.tsx";
import { Fact, Facts, RunFact, TimeFact } from "./facts.tsx";
import { ago, notificationText, pretty, utc } from "./format.ts";
import { Badge } from "./timeline.tsx";
import { ResolveForm } from "./verdict-form.tsx";
import type { FormState } from "./verdict.ts";

/** An operation still waiting for a person, with its view and its log. */
export type Waiting = {
  operation_id: string;
  run_id: string;
  tool: string;
  since: string;
  view: OperationView;
  events: TraceEvent[];
};

const SAFETY_TEXT: Record<OperationView["repeat_safety"], string> = {
  keyed:
    "The tool deduplicates by idempotency key: sending it again with the same key cannot repeat the effect.",
  lookup:
    "The tool has a status lookup, but it gave no clear answer. It has no idempotency key, so toolgate will not send it again.",
  neither:
    "The tool has no idempotency key and no status lookup: only the upstream system can tell. toolgate will not send it again.",
  read: "A read: it changed nothing upstream.",
};

export const UnknownCard = ({
  item,
  csrf,
  nowMs,
  form,
  notified,
}: {
  item: Waiting;
  /** Its operation.outcome_unknown event's webhook deliveries; null when the tenant could not answer. */
  notified: NotificationState | null;
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
        <Facts>
          <RunFact runId={item.run_id} operationId={id} />
          <TimeFact
            label="Waiting since"
            at={item.since}
            hint={ago(Date.parse(item.since), nowMs)}
          />
          {notified && <Fact label="Notification">{notificationText(notified)}</Fact>}
          <Fact label="Operation" mono>
            {id}
          </Fact>
          <Fact label="Target" mono>
            {view.redacted.target}
          </Fact>
          <Fact label="Arguments">
            <pre data-role="arguments">{pretty(view.redacted.arguments)}</pre>
          </Fact>
          {/* Only a keyed tool is sent a key: naming one for any other would contradict "Sending again". */}
          {view.repeat_safety === "keyed" ? (
            <Fact label="Idempotency key" mono>
              {view.idempotency_key}
            </Fact>
          ) : (
            <Fact label="Idempotency key">none sent (the tool takes none)</Fact>
          )}
          <Fact label="Sending again">{SAFETY_TEXT[view.repeat_safety]}</Fact>
          {view.settling && <SettlingFact settling={view.settling} />}
        </Facts>
        <h3>Attempts and what the upstream said</h3>
        <Attempts events={item.events} />
        <ResolveForm
          operationId={id}
          tool={item.tool}
          keyed={view.repeat_safety === "keyed"}
          csrf={csrf}
          form={form}
        />
      </div>
    </article>
  );
};

/** Issue 24: "settling by itself — next try at …, until …"; a person's verdict still wins. */
const SettlingFact = ({ settling }: { settling: NonNullable<OperationView["settling"]> }) => (
  <Fact label="Settling by itself">
    {settling.next_try_at ? (
      <>
        next try at <time datetime={settling.next_try_at}>{utc(settling.next_try_at)}</time>
      </>
    ) : (
      "a try is in flight now"
    )}
    , until <time datetime={settling.until}>{utc(settling.until)}</time>; then a person decides.
    Your verdict stops it.
  </Fact>
);
