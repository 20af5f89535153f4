// Acting as the user (issue 36), the operation's side: the run's end user's access token, asked of
// their CredentialObject immediately before each send (never at proposal, never stored here), and
// the wake after they connect. The token rides in the request's secrets under CREDENTIAL_KEY, so
// every scrub and mask of secrets (tools/secrets.ts) keeps it out of traces, answers and errors.
import type { TokenAnswer } from "../credential/contracts.ts";
import type { Env } from "../env.ts";
import { credentialStub } from "../stubs.ts";
import { CREDENTIAL_KEY } from "../../tools/manifest/url.ts";
import type { FrozenRow, Shell } from "./contracts.ts";
import type { OperationLog } from "./log.ts";
import type { OperationEvent } from "../../domain/operation/index.ts";
import { callbackUri, connectLink } from "../credential/connect.ts";
import { gatherAlarmSend } from "./gather.ts";

export type CredentialAsk = { kind: "none" } | TokenAnswer;

/** The frozen plan's credential coordinates as the credential object names its owner. */
export const ownerOf = (frozen: FrozenRow) => {
  const wanted = frozen.plan.credential;
  return wanted
    ? { tenantId: frozen.tenant_id, user: wanted.user, provider: wanted.provider }
    : null;
};

/** The user's token for this send; a callee that throws is transient (nothing was sent). */
export async function askCredential(env: Env, frozen: FrozenRow): Promise<CredentialAsk> {
  const owner = ownerOf(frozen);
  if (!owner) return { kind: "none" };
  try {
    return await credentialStub(env, owner.tenantId, owner.user, owner.provider).token(
      owner,
      frozen.plan.credential!.scopes,
    );
  } catch (error) {
    return {
      kind: "transient",
      detail: `the user's credential could not be read (${String(error)})`,
    };
  }
}

/** The secrets a request draws on, with the user's token when there is one. */
export const withCredential = (secrets: Record<string, string>, ask: CredentialAsk) =>
  ask.kind === "token" ? { ...secrets, [CREDENTIAL_KEY]: ask.accessToken } : secrets;

/** No credential asked (the secrets were not there): the attempt fails as it did before issue 36. */
export const NO_CREDENTIAL: CredentialAsk = { kind: "none" };

/**
 * The event for a send that found no usable token: the operation is listed at the user's
 * credential object (woken after a connect) and a fresh connect link made for the model's envelope.
 * Neither failing sends anything: the link is then the connections route's to make, and the
 * recheck alarm finds the connection without the wake.
 */
export async function credentialRequired(
  env: Env,
  log: OperationLog,
  attempt: number,
  answer: Extract<TokenAnswer, { kind: "needs_consent" }>,
): Promise<OperationEvent> {
  const frozen = log.head()!.frozen;
  const owner = ownerOf(frozen)!;
  const stub = credentialStub(env, owner.tenantId, owner.user, owner.provider);
  const scopes = frozen.plan.credential!.scopes;
  const [, link] = await Promise.all([
    stub.wait(owner, frozen.id).catch(() => undefined),
    connectLink(env, owner, callbackUri(env), scopes).catch(() => null),
  ]);
  return {
    type: "credential_required",
    attempt,
    provider: owner.provider,
    reason: answer.reason,
    connectUrl: link?.ok
      ? link.value.authorization_url
      : `${callbackUri(env).replace(/\/oauth\/callback$/, "")}/v1/connections`,
  };
}

/**
 * Told that the user connected, or its recheck alarm: asks the connection's health, and sends the
 * attempt it gave back once the user can be acted for (else the recheck is armed again).
 */
export async function wakeForCredential(shell: Shell): Promise<void> {
  const head = shell.log.head();
  if (head?.state.phase !== "awaiting_credential") return;
  const owner = ownerOf(head.frozen);
  if (!owner) return;
  const scopes = head.frozen.plan.credential!.scopes;
  const health = await credentialStub(shell.env, owner.tenantId, owner.user, owner.provider)
    .view(owner, scopes)
    .then((view) => view.health)
    .catch(() => "needs_consent" as const);
  if (health === "needs_consent") return void shell.apply({ type: "alarm", inFlight: false });
  // Connected: the send asks what every automatic send asks first (the run, Cedar, freezes, the
  // retry budget), as the retry it gave back would.
  const nowMs = Date.now();
  const prepared = await gatherAlarmSend(shell.env, shell.log, head, nowMs);
  const instead = prepared.instead;
  if (instead?.type === "retry_deferred")
    return void shell.apply({ type: "alarm", inFlight: false }); // the recheck asks again
  shell.apply(instead ?? { type: "credential_ready" }, prepared.secrets);
}
