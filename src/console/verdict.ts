// A person's verdict on an unknown outcome, as the console form sends it: the outcome (succeeded,
// failed, or — keyed tools only, which the operation enforces — resend), a required reason, and an
// optional JSON result that goes only with "succeeded". Pure: parseVerdict checks the form's text and
// says what is wrong in words shown to the person; nothing is recorded unless it parses.

/** The unknown-outcomes page; each card's form posts to `${HOME}/<operation>/resolve`. */
export const HOME = "/console/unknown-outcomes";
export const MAX_REASON = 2000;
const OUTCOMES = ["succeeded", "failed", "resend"] as const;
export type Outcome = (typeof OUTCOMES)[number];

/** A form that did not parse: shown again on its own card with what the person typed. */
export type FormState = {
  operationId: string;
  error: string;
  outcome: string;
  result: string;
  reason: string;
};

type Parsed =
  { ok: true; outcome: Outcome; result: unknown; reason: string } | { ok: false; error: string };

/** The verdict form, checked: a known outcome, a reason, and a result only with "succeeded", as JSON. */
export function parseVerdict(form: { outcome: string; result: string; reason: string }): Parsed {
  const outcome = OUTCOMES.find((value) => value === form.outcome);
  if (!outcome) return { ok: false, error: "Choose what happened upstream. Nothing was recorded." };
  const reason = form.reason.trim();
  if (!reason)
    return { ok: false, error: "A verdict needs a reason (how you know). Nothing was recorded." };
  if (reason.length > MAX_REASON)
    return {
      ok: false,
      error: `A reason is at most ${MAX_REASON} characters. Nothing was recorded.`,
    };
  const text = form.result.trim();
  if (!text) return { ok: true, outcome, result: null, reason };
  if (outcome !== "succeeded")
    return {
      ok: false,
      error:
        'A result goes only with "It happened (succeeded)". Clear it or choose succeeded. Nothing was recorded.',
    };
  try {
    return { ok: true, outcome, result: JSON.parse(text), reason };
  } catch (error) {
    return {
      ok: false,
      error: `The result is not valid JSON (${error instanceof Error ? error.message : String(error)}). Nothing was recorded.`,
    };
  }
}
