// The approve and reject forms on a pending approval card. Both carry the session's CSRF token and
// the input_hash and policy_version of what the card showed, so the operation refuses a decision
// about other arguments or another tool version. Approving takes an optional reason; rejecting
// needs one (the agent is told it).
import { HOME, MAX_REASON, type Item } from "./approval-decision.ts";

const Bound = ({ item, csrf }: { item: Item; csrf: string }) => (
  <>
    <input type="hidden" name="csrf" value={csrf} />
    <input type="hidden" name="input_hash" value={item.input_hash} />
    <input type="hidden" name="policy_version" value={item.policy_version} />
  </>
);

export const DecideForms = ({ item, csrf }: { item: Item; csrf: string }) => {
  const id = item.operation_id;
  return (
    <div class="decide">
      <form
        method="post"
        action={`${HOME}/${id}/approve`}
        class="stack"
        aria-label={`Approve ${item.tool}`}
      >
        <Bound item={item} csrf={csrf} />
        <div>
          <label for={`${id}-approve-reason`}>Reason for approving</label>
          <p class="hint" id={`${id}-approve-hint`}>
            Optional. Recorded with your name in the operation's log.
          </p>
          <textarea
            id={`${id}-approve-reason`}
            name="reason"
            rows={2}
            maxlength={MAX_REASON}
            aria-describedby={`${id}-approve-hint`}
          ></textarea>
        </div>
        <div>
          <button type="submit" class="approve">
            Approve and run
          </button>
        </div>
      </form>
      <form
        method="post"
        action={`${HOME}/${id}/reject`}
        class="stack"
        aria-label={`Reject ${item.tool}`}
      >
        <Bound item={item} csrf={csrf} />
        <div>
          <label for={`${id}-reject-reason`}>Reason for rejecting</label>
          <p class="hint" id={`${id}-reject-hint`}>
            Required. The agent is told this call was rejected, with your reason.
          </p>
          <textarea
            id={`${id}-reject-reason`}
            name="reason"
            rows={2}
            maxlength={MAX_REASON}
            required
            aria-describedby={`${id}-reject-hint`}
          ></textarea>
        </div>
        <div>
          <button type="submit" class="reject">
            Reject
          </button>
        </div>
      </form>
    </div>
  );
};
