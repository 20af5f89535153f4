// Approval routing, pure (issue 35): who may vote on a routed approval (the groups of the steps
// reached so far, never the proposer), whose a vote is (a delegate's counts as its delegator's),
// when quorum is reached, and the route's timer — remind a step's group once, then escalate to the
// next group. The timer only ever asks more people: nothing here approves, and the last step waits
// for the approval's expiry like an unrouted request.
import type { RouteData } from "../journal/events.ts";
import { eventsOf } from "../journal/trace-event.ts";
import { err, ok, type Result } from "../result.ts";
import type {
  ApproverGroup,
  Decision,
  DecisionRefusal,
  Route,
  Routing,
  TraceEvent,
  ApprovalRequest,
} from "./state.ts";

export const startRouting = (nowMs: number): Routing => ({
  step: 0,
  stepAtMs: nowMs,
  reminded: false,
  votes: [],
});

/** Whose vote a decision is: the delegator's when it came through a delegation in force. */
export const voterOf = (decision: Decision): string =>
  decision.onBehalfOf?.id ?? decision.approverId;

const reached = (route: Route, routing: Routing) => route.steps.slice(0, routing.step + 1);

/**
 * A vote counts only from a member of a group reached so far (escalation adds a group, it takes
 * none away) and never from the proposer, whoever casts it: quorum is m people *besides* the one
 * who asked, whatever `four_eyes` says.
 */
export function mayVote(
  request: ApprovalRequest & { route: Route },
  routing: Routing,
  decision: Decision,
): Result<true, DecisionRefusal> {
  const voter = voterOf(decision);
  if (voter === request.requestedBy || decision.approverId === request.requestedBy)
    return err({
      code: "self_approval",
      detail: `${request.requestedBy} asked for this call and cannot vote on it; ${request.route.quorum} other people must. Nothing was counted`,
    });
  const scopes = decision.onBehalfOf?.scopes ?? decision.scopes ?? [];
  const groups = reached(request.route, routing).map((step) => step.group);
  if (
    groups.some(
      (g) =>
        g.members.includes(voter) ||
        g.scopes.some((s) => scopes.includes(s)) ||
        hasAttribute(g, decision),
    )
  )
    return ok(true);
  return err({
    code: "not_an_approver",
    detail: `${voter} is in none of the groups this call's approval is routed to now (${groups.map((g) => g.name).join(", ")}); nothing was counted`,
  });
}

/**
 * Whether the decider's verified attributes put them in `group`: only a person Access verified, and
 * only for their own vote (a delegate's attributes are not the delegator's; a delegated vote is
 * judged by the delegator's id and scopes). A claim matches when it equals one of the group's
 * values or is an array holding one; an email domain compares case-insensitively.
 */
export function hasAttribute(group: ApproverGroup, decision: Decision): boolean {
  if (decision.via !== "access" || decision.onBehalfOf || !decision.claims) return false;
  const claims = decision.claims;
  const byClaim = Object.entries(group.claims ?? {}).some(([name, wanted]) =>
    (claims[name] ?? []).some((value) => wanted.includes(value)),
  );
  if (byClaim) return true;
  const email = claims.email?.[0]?.toLowerCase();
  const domain = email?.includes("@") ? email.slice(email.lastIndexOf("@") + 1) : null;
  return domain !== null && (group.email_domains ?? []).some((d) => d.toLowerCase() === domain);
}

/**
 * The routing with this vote counted, or null: already counted — the same person's vote (cast by
 * them or their delegate), or a second press by someone who already cast one in another capacity:
 * quorum counts distinct people.
 */
export function countVote(routing: Routing, decision: Decision, nowMs: number): Routing | null {
  const by = voterOf(decision);
  if (routing.votes.some((vote) => vote.by === by || vote.castBy === decision.approverId))
    return null;
  const vote = { by, castBy: decision.approverId, via: decision.via, atMs: nowMs };
  return { ...routing, votes: [...routing.votes, vote] };
}

/** When the route's timer is due next (this step's reminder, the escalation past it); null: none. */
export function nextRouteAtMs(route: Route, routing: Routing): number | null {
  const step = route.steps[routing.step];
  if (!step) return null;
  const due = [
    !routing.reminded && step.remindAfterMs !== null ? routing.stepAtMs + step.remindAfterMs : null,
    routing.step < route.steps.length - 1 && step.escalateAfterMs !== null
      ? routing.stepAtMs + step.escalateAfterMs
      : null,
  ].filter((at): at is number => at !== null);
  return due.length > 0 ? Math.min(...due) : null;
}

/**
 * What the route's timer does at `nowMs`: the reminder if due and not sent, then the escalation if
 * due (both, when an alarm comes late — after a restart — past both). Null: nothing is due (an
 * at-least-once alarm that fired early or twice). The next group's own timers start now.
 */
export function routeAlarm(
  route: Route,
  routing: Routing,
  nowMs: number,
): { routing: Routing; trace: TraceEvent[] } | null {
  const step = route.steps[routing.step];
  if (!step) return null;
  const trace: TraceEvent[] = [];
  let next = routing;
  if (
    !routing.reminded &&
    step.remindAfterMs !== null &&
    nowMs >= routing.stepAtMs + step.remindAfterMs
  ) {
    next = { ...next, reminded: true };
    trace.push({
      type: "approval_reminded",
      at_ms: nowMs,
      step: routing.step,
      group: step.group.name,
    });
  }
  const to = route.steps[routing.step + 1];
  if (to && step.escalateAfterMs !== null && nowMs >= routing.stepAtMs + step.escalateAfterMs) {
    next = { ...next, step: routing.step + 1, stepAtMs: nowMs, reminded: false };
    trace.push({
      type: "approval_escalated",
      at_ms: nowMs,
      step: routing.step + 1,
      group: to.group.name,
      from_group: step.group.name,
    });
  }
  return trace.length > 0 ? { routing: next, trace } : null;
}

/**
 * The route as the inbox, the console and the events show it: the votes so far and who may still
 * vote (the groups reached, their listed members who have not voted; anyone holding one of their
 * scopes, except those in `excluded`: the proposer and those who voted).
 */
export function routeData(route: Route, routing: Routing, requestedBy: string): RouteData {
  const voted = routing.votes.map((vote) => vote.by);
  const excluded = [requestedBy, ...voted];
  return {
    quorum: route.quorum,
    needed: Math.max(0, route.quorum - routing.votes.length),
    step: routing.step,
    steps: route.steps.length,
    group: route.steps[routing.step]?.group.name ?? null,
    reminded: routing.reminded,
    votes: routing.votes.map((vote) => ({
      by: vote.by,
      ...(vote.castBy !== vote.by ? { cast_by: vote.castBy } : {}),
      via: vote.via,
      at_ms: vote.atMs,
    })),
    may_vote: reached(route, routing).map(({ group }) => ({
      group: group.name,
      scopes: group.scopes,
      members: group.members.filter((member) => !excluded.includes(member)),
      ...(group.claims && Object.keys(group.claims).length > 0 ? { claims: group.claims } : {}),
      ...(group.email_domains?.length ? { email_domains: group.email_domains } : {}),
    })),
    excluded,
  };
}

/**
 * The routing a log tells (for views, once the request is closed and the state no longer holds it):
 * the counted votes, the step reached and whether that step was reminded, from the trace alone.
 */
export function routingOfTrace(trace: readonly TraceEvent[], requestedAtMs: number): Routing {
  const escalated = eventsOf(trace, "approval_escalated");
  const last = escalated.at(-1);
  const step = last?.step ?? 0;
  return {
    step,
    stepAtMs: last?.at_ms ?? requestedAtMs,
    reminded: eventsOf(trace, "approval_reminded").some((r) => r.step === step),
    votes: eventsOf(trace, "approval_voted").map((v) => ({
      by: v.by,
      castBy: v.cast_by ?? v.by,
      via: v.via,
      atMs: v.at_ms,
    })),
  };
}
