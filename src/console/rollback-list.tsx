// A run's rollback (issue 22: POST /v1/runs/{id}/cancel { "rollback": true }) on its console page:
// each applied write newest first, how its compensation stands, and why the rollback stopped when it
// did. The run's own view (GET /v1/runs/{id} `rollback`), nothing recomputed here.
import type { FC } from "hono/jsx";
import type { RollbackView } from "../domain/rollback.ts";

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
