// A person's approve or reject, as the inbox forms send it and as the operation answers it: the
// inbox address and the reason limit the forms and the handler share, and decisionFlash, which puts
// the operation's answer into words for the inbox flash. The operation's answer is authoritative:
// the request may already have been decided, have expired or been cancelled. Pure.
import type { Decided, OperationError } from "../durable/operation/contracts.ts";
import type { ApprovalPage } from "../durable/tenant/inbox.ts";
import { toApiError } from "../http/problem.ts";
import type { Result } from "../domain/result.ts";
import type { Flash } from "./flash.ts";
import { utc } from "./format.ts";

/** The approvals inbox; a pending card's forms post to `${HOME}/<operation>/approve` or `/reject`. */
export const HOME = "/console/approvals";
export const MAX_REASON = 2000;
/** One row of the tenant's approvals inbox. */
export type Item = ApprovalPage["items"][number];

/** What happened, in words: the operation's answer is authoritative (it may already have been decided). */
export function decisionFlash(decided: Result<Decided, OperationError>): Flash {
  if (!decided.ok) {
    const { code, detail } = toApiError(decided.error);
    switch (code) {
      case "self_approval":
        return { tone: "error", text: `Refused (four eyes): ${detail}. Nothing was decided.` };
      case "approval_mismatch":
        return {
          tone: "error",
          text: `Refused: ${detail} (it changed since this page was shown). Nothing was decided; reload and check it again.`,
        };
      case "not_found":
        return {
          tone: "error",
          text: "There is no such approval request in this tenant. Nothing was decided.",
        };
      default:
        return { tone: "error", text: `Nothing was decided: ${detail}.` };
    }
  }
  const { view, decided: mine } = decided.value;
  const approval = view.approval;
  const tool = view.tool;
  if (!approval)
    return { tone: "error", text: `${tool} does not wait for approval. Nothing was decided.` };
  switch (approval.state) {
    case "pending":
      return {
        tone: "error",
        text: `${tool} is still waiting; your decision was not recorded. Try again.`,
      };
    case "expired":
      return {
        tone: "error",
        text: `Refused: the approval for ${tool} had expired, so nothing was run. The agent is told it needs a person's approval.`,
      };
    case "cancelled":
      return {
        tone: "error",
        text: `${tool} was cancelled before it was decided, so nothing was run.`,
      };
    case "approved":
    case "rejected": {
      if (!mine)
        return {
          tone: "info",
          text: `${tool} was already ${approval.state} by ${approval.decided_by ?? "someone"}${approval.decided_at ? ` at ${utc(approval.decided_at)}` : ""}; your decision was not recorded.`,
        };
      if (approval.state === "rejected")
        return {
          tone: "ok",
          text: `Rejected ${tool}. Nothing was sent; the agent is told it was rejected.`,
        };
      const result = view.result;
      // Approval is not authorization: the run may refuse it now (scopes revoked, deadline, tool changed).
      if (view.phase === "recorded" && result.status !== "succeeded")
        return {
          tone: "error",
          text: `Approved, but toolgate did not run ${tool}: ${result.message}`,
        };
      return {
        tone: "ok",
        text: `Approved ${tool}. It runs once now, with the arguments and tool version you approved; follow it on the run page.`,
      };
    }
  }
}
