// The passkey step-up at the edge (issue 35), with @simplewebauthn/server: registering a person's
// passkey (the console's routes) and verifying an assertion made for one operation's approval. The
// assertion must come from a passkey registered to the decider, over the challenge derived from this
// operation id and input hash (domain/step-up.ts), from the console's origin, with user
// verification, and move the passkey's counter forward; anything else is 401 `step_up_failed` and
// nothing is decided. The relying party is the console's origin (TOOLGATE_CONSOLE_URL or the request's).
import {
  generateRegistrationOptions,
  verifyAuthenticationResponse,
  verifyRegistrationResponse,
} from "@simplewebauthn/server";
import { isoBase64URL } from "@simplewebauthn/server/helpers";
import type { z } from "zod";
import { consoleOrigin } from "../config.ts";
import { stepUpChallenge } from "../domain/step-up.ts";
import type { Env } from "../durable/env.ts";
import { tenantStub } from "../durable/stubs.ts";
import type { StoredPasskey } from "../durable/tenant/passkeys.ts";
import { ApiProblem } from "./problem.ts";
import type { PasskeyAssertion, PasskeyRegistration } from "./schemas.ts";

const relyingParty = (env: Env, requestUrl: string) => {
  const origin = consoleOrigin(env, requestUrl);
  return { origin, rpID: new URL(origin).hostname };
};

const refused = (detail: string) =>
  new ApiProblem({ code: "step_up_failed", detail: `${detail}; nothing was decided` });

/** Throws `step_up_failed` unless `assertion` is `person`'s passkey, made for this operation's approval hash. */
export async function verifyStepUp(
  env: Env,
  requestUrl: string,
  tenantId: string,
  person: string,
  approval: { operationId: string; approvalHash: string },
  assertion: z.infer<typeof PasskeyAssertion>,
): Promise<void> {
  const tenant = tenantStub(env, tenantId);
  const stored = await tenant.passkey(assertion.id);
  // Someone else's passkey proves nothing about this decider: the same answer as an unknown one.
  if (!stored || stored.person !== person)
    throw refused(`${person} has no registered passkey with this id`);
  const { origin, rpID } = relyingParty(env, requestUrl);
  let verified: Awaited<ReturnType<typeof verifyAuthenticationResponse>>;
  try {
    verified = await verifyAuthenticationResponse({
      response: assertion,
      expectedChallenge: stepUpChallenge(approval.operationId, approval.approvalHash),
      expectedOrigin: origin,
      expectedRPID: rpID,
      credential: {
        id: stored.credential_id,
        publicKey: isoBase64URL.toBuffer(stored.public_key),
        counter: stored.counter,
      },
      requireUserVerification: true,
    });
  } catch (error) {
    // The library names the check that failed (challenge, origin, RP id, signature, counter, flags).
    throw refused(`the passkey assertion was refused: ${(error as Error).message}`);
  }
  if (!verified.verified) throw refused("the passkey signature does not verify");
  const counter = verified.authenticationInfo.newCounter;
  if (!(await tenant.advancePasskey(stored.credential_id, stored.counter, counter)))
    throw refused("this passkey assertion was already used");
}

/** The options a browser's `navigator.credentials.create` takes to register `person`'s passkey. */
export async function registrationOptions(
  env: Env,
  requestUrl: string,
  tenantId: string,
  person: string,
  challenge: string,
) {
  const { rpID } = relyingParty(env, requestUrl);
  const existing = await tenantStub(env, tenantId).passkeysOf(person);
  return generateRegistrationOptions({
    rpName: "toolgate",
    rpID,
    userName: person,
    challenge,
    attestationType: "none",
    excludeCredentials: existing.map((passkey) => ({ id: passkey.credential_id })),
    authenticatorSelection: { residentKey: "preferred", userVerification: "required" },
  });
}

/** Verifies a registration made over `challenge` and stores the passkey as `person`'s. */
export async function registerPasskey(
  env: Env,
  requestUrl: string,
  tenantId: string,
  person: string,
  challenge: string,
  registration: z.infer<typeof PasskeyRegistration>,
  nowMs: number,
): Promise<StoredPasskey> {
  const { origin, rpID } = relyingParty(env, requestUrl);
  let verified: Awaited<ReturnType<typeof verifyRegistrationResponse>>;
  try {
    verified = await verifyRegistrationResponse({
      response: registration,
      expectedChallenge: isoBase64URL.fromUTF8String(challenge),
      expectedOrigin: origin,
      expectedRPID: rpID,
      requireUserVerification: true,
    });
  } catch (error) {
    throw new ApiProblem({
      code: "invalid_request",
      detail: `the passkey registration was refused: ${(error as Error).message}`,
    });
  }
  if (!verified.verified || !verified.registrationInfo)
    throw new ApiProblem({
      code: "invalid_request",
      detail: "the passkey registration does not verify",
    });
  const { credential } = verified.registrationInfo;
  const passkey: StoredPasskey = {
    credential_id: credential.id,
    person,
    public_key: isoBase64URL.fromBuffer(credential.publicKey),
    counter: credential.counter,
    created_at_ms: nowMs,
  };
  const added = await tenantStub(env, tenantId).addPasskey(passkey);
  if (!added.ok) throw new ApiProblem({ code: "invalid_request", detail: added.error.detail });
  return passkey;
}
