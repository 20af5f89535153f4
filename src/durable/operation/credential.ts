// Acting as the user (issue 36), the operation's side: the user's access token asked of their
// CredentialObject immediately before each send (never at proposal), and the wake after a connect.
import type { Env } from "../env.ts";
import type { EffectHost } from "./effects.ts";

export async function wakeForCredential(_shell: EffectHost): Promise<void> {}
