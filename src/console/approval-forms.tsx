// The approve and reject forms on a pending approval card. Both carry the session's CSRF token and
// the input_hash, policy_version and approval_hash of what the card showed, so the operation refuses
// a decision about other arguments, another tool version or another approval of the call (a
// payment's, asked after its own was decided: a form posted twice never approves it). Approving takes an optional reason; rejecting
// needs one (the agent is told it).
import { HOME, MAX_REASON, type Item } from "./approval-decision.ts";

type Verdict = "approve" | "reject";

const WORDS: Record<
  Verdict,
  { action: string; label: string; hint: string; required: boolean; button: string }
> = {
  approve: {
    action: "Approve",
    label: "Reason for approving",
    hint: "Optional. Recorded with your name in the operation's log.",
    required: false,
    button: "Approve and run",
  },
  reject: {
    action: "Reject",
    label: "Reason for rejecting",
    hint: "Required. The agent is told this call was rejected, with your reason.",
    required: true,
    button: "Reject",
  },
};

/** `challenge`: the tool steps up with a passkey (issue 35) — approving asks the browser for one first. */
export const DecideForms = ({
  item,
  csrf,
  challenge,
}: {
  item: Item;
  csrf: string;
  challenge: string | null;
}) => (
  <div class="decide">
    <DecideForm item={item} csrf={csrf} verdict="approve" challenge={challenge} />
    <DecideForm item={item} csrf={csrf} verdict="reject" challenge={null} />
  </div>
);

/** One verdict's form; it posts to `${HOME}/<operation>/<verdict>`. */
const DecideForm = ({
  item,
  csrf,
  verdict,
  challenge,
}: {
  item: Item;
  csrf: string;
  verdict: Verdict;
  challenge: string | null;
}) => {
  const id = item.operation_id;
  const words = WORDS[verdict];
  return (
    <form
      method="post"
      action={`${HOME}/${id}/${verdict}`}
      class="stack"
      aria-label={`${words.action} ${item.tool}`}
    >
      <input type="hidden" name="csrf" value={csrf} />
      <input type="hidden" name="input_hash" value={item.input_hash} />
      <input type="hidden" name="policy_version" value={item.policy_version} />
      <input type="hidden" name="approval_hash" value={item.approval_hash} />
      <div>
        <label for={`${id}-${verdict}-reason`}>{words.label}</label>
        <p class="hint" id={`${id}-${verdict}-hint`}>
          {words.hint}
        </p>
        <textarea
          id={`${id}-${verdict}-reason`}
          name="reason"
          rows={2}
          maxlength={MAX_REASON}
          required={words.required}
          aria-describedby={`${id}-${verdict}-hint`}
        ></textarea>
      </div>
      <div>
        {challenge ? (
          <>
            <input type="hidden" name="passkey" value="" />
            <button type="button" class={verdict} data-passkey="approve" data-challenge={challenge}>
              {words.button} (passkey)
            </button>
          </>
        ) : (
          <button type="submit" class={verdict}>
            {words.button}
          </button>
        )}
      </div>
    </form>
  );
};
