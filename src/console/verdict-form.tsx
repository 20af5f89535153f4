// The verdict form on an unknown-outcome card: what happened upstream (resend is offered only for a
// keyed tool, whose upstream deduplicates the key), the result for "succeeded", and a required
// reason. It posts to HOME/<operation>/resolve with the session's CSRF token; a form that did not
// parse comes back with the person's values and its error, linked by aria-describedby.
import { HOME, MAX_REASON, type FormState, type Outcome } from "./verdict.ts";

export const ResolveForm = ({
  operationId: id,
  tool,
  keyed,
  csrf,
  form,
}: {
  operationId: string;
  tool: string;
  keyed: boolean;
  csrf: string;
  form: FormState | null;
}) => {
  const choices: Array<{ value: Outcome; label: string; hint: string }> = [
    {
      value: "succeeded",
      label: "It happened (succeeded)",
      hint: "The agent is told it succeeded, with the result below.",
    },
    {
      value: "failed",
      label: "It did not happen (failed)",
      hint: "The agent is told it did not happen and must not retry.",
    },
    ...(keyed
      ? [
          {
            value: "resend" as const,
            label: "Send it again with the same idempotency key",
            hint: "Safe only because the upstream deduplicates this key.",
          },
        ]
      : []),
  ];
  const errorId = `${id}-error`;
  return (
    <form
      method="post"
      action={`${HOME}/${id}/resolve`}
      class="stack resolve"
      aria-label={`Resolve ${tool}`}
      aria-describedby={form ? errorId : undefined}
    >
      <input type="hidden" name="csrf" value={csrf} />
      {form && (
        <div class="alert" role="alert" id={errorId}>
          <p>{form.error}</p>
        </div>
      )}
      <fieldset>
        <legend>What happened upstream?</legend>
        {choices.map((choice) => (
          <div class="choice">
            <input
              type="radio"
              id={`${id}-${choice.value}`}
              name="outcome"
              value={choice.value}
              required
              checked={form?.outcome === choice.value}
              aria-describedby={`${id}-${choice.value}-hint`}
            />
            <label for={`${id}-${choice.value}`}>{choice.label}</label>
            <p class="hint" id={`${id}-${choice.value}-hint`}>
              {choice.hint}
            </p>
          </div>
        ))}
      </fieldset>
      <div>
        <label for={`${id}-result`}>Result (JSON)</label>
        <p class="hint" id={`${id}-result-hint`}>
          Only with "It happened": what the agent should receive, e.g. the id the upstream system
          shows. Leave empty for none.
        </p>
        <textarea
          id={`${id}-result`}
          name="result"
          rows={3}
          class="mono"
          spellcheck={false}
          aria-describedby={`${id}-result-hint`}
        >
          {form?.result ?? ""}
        </textarea>
      </div>
      <div>
        <label for={`${id}-reason`}>Reason</label>
        <p class="hint" id={`${id}-reason-hint`}>
          Required: how you know. Recorded with your name in the operation's log.
        </p>
        <textarea
          id={`${id}-reason`}
          name="reason"
          rows={2}
          maxlength={MAX_REASON}
          required
          aria-describedby={`${id}-reason-hint`}
        >
          {form?.reason ?? ""}
        </textarea>
      </div>
      <div>
        <button type="submit">Record verdict</button>
      </div>
    </form>
  );
};
