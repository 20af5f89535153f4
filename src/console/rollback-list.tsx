// A run's rollback (issue 22: POST /v1/runs/{id}/cancel { "rollback": true }) on its console page:
// each applied write newest first, how its compensation stands, and why the rollback stopped when it
// did. The run's own view (GET /v1/runs/{id} `rollback`), nothing recomputed here. While it runs,
// its plan (GET /v1/runs/{id}/rollback, issue 35 item 4) with one "Approve plan" form for people
// who may decide: the hashes it shows are the ones the form approves, exactly.
import type { FC } from "hono/jsx";
import type { RollbackView } from "../domain/rollback.ts";
import type { RollbackPlan } from "../durable/run/rollback-plan.ts";

/** A step's state as a badge class the stylesheet already colours. */
const BADGE: Record<RollbackView["steps"][number]["state"], string> = {
  pending: "pending",
  submitted: "pending",
  compensated: "succeeded",
  failed: "failed",
  outcome_unknown: "outcome_unknown",
  not_compensable: "cancelled",
  unsettled: "outcome_unknown",
};

const ROLLBACK_BADGE: Record<RollbackView["state"], string> = {
  running: "pending",
  completed: "succeeded",
  stopped: "outcome_unknown",
};

const SUMMARY: Record<RollbackView["state"], string> = {
  running: "Running: each write is compensated once the one before it is recorded as undone.",
  completed: "Completed: every write that could be undone was.",
  stopped: "Stopped at the step marked below: a person must settle it; nothing after it was asked.",
};

export const RollbackSteps: FC<{ rollback: RollbackView }> = ({ rollback }) => (
  <section aria-labelledby="rollback-title">
    <h2 id="rollback-title">
      Rollback <span class={`badge ${ROLLBACK_BADGE[rollback.state]}`}>{rollback.state}</span>
    </h2>
    <p class="hint">{SUMMARY[rollback.state]} Newest write first.</p>
    {rollback.steps.length === 0 ? (
      <p>The run applied no write, so there was nothing to undo.</p>
    ) : (
      <ol aria-label="Rollback steps" data-role="rollback-steps">
        {rollback.steps.map((step) => (
          <li data-state={step.state}>
            <span class="mono">{step.tool}</span>{" "}
            <span class={`badge ${BADGE[step.state]}`}>{step.state.replace(/_/g, " ")}</span> ·{" "}
            <a class="mono" href={`#${step.operation_id}`}>
              {step.operation_id}
            </a>
            {step.compensation_id ? (
              <>
                {" "}
                undone by{" "}
                <a class="mono" href={`#${step.compensation_id}`}>
                  {step.compensation_id}
                </a>
              </>
            ) : null}
            {step.detail ? <p class="hint">{step.detail}</p> : null}
          </li>
        ))}
      </ol>
    )}
  </section>
);

/** The plan a person approves at once: each compensation still to come, its arguments and hash. */
export const RollbackPlanForm: FC<{ runId: string; plan: RollbackPlan; csrf: string | null }> = ({
  runId,
  plan,
  csrf,
}) => (
  <section aria-labelledby="rollback-plan-title" data-role="rollback-plan">
    <h3 id="rollback-plan-title">Plan: approve every compensation at once</h3>
    <p class="hint">
      Each compensation below runs without another approval once it is reached with exactly this
      input hash and tool version (four eyes and a route's groups apply as if you approved each one
      alone; a passkey step-up still asks). One whose arguments change meanwhile asks a person.
    </p>
    <ol aria-label="Rollback plan">
      {plan.items.map((item) => (
        <li>
          <span class="mono">{item.compensation_tool}</span> undoes{" "}
          <a class="mono" href={`#${item.operation_id}`}>
            {item.operation_id}
          </a>
          {item.step_up ? <span class="badge pending">passkey: asks alone</span> : null}
          <pre class="mono">{JSON.stringify(item.arguments, null, 2)}</pre>
          <p class="hint mono">input hash {item.input_hash}</p>
        </li>
      ))}
    </ol>
    {plan.approvals.length > 0 ? (
      <p data-role="plan-approvals">
        Approved by{" "}
        {plan.approvals.map((a) => `${a.by} (${a.input_hashes.length} compensation(s))`).join(", ")}
        .
      </p>
    ) : null}
    {csrf && plan.items.length > 0 ? (
      <form method="post" action={`/console/runs/${runId}/rollback/approve`}>
        <input type="hidden" name="csrf" value={csrf} />
        <input
          type="hidden"
          name="input_hashes"
          value={plan.items.map((i) => i.input_hash).join(",")}
        />
        <input
          type="hidden"
          name="policy_versions"
          value={plan.items.map((i) => i.policy_version).join(",")}
        />
        <label>
          Reason <input name="reason" maxlength={2000} />
        </label>{" "}
        <button type="submit">Approve plan</button>
      </form>
    ) : null}
  </section>
);
