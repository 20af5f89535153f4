// The one-time status message a POST leaves for the page it redirects to (303, post/redirect/get):
// a short-lived cookie, HMAC-signed under TOOLGATE_SIGNING_KEY and bound to this session's id, so a
// crafted link or another session can never make the console claim "approved" for anything. The
// next page view shows it once and clears it. Its text is rendered as JSX text (escaped).
import type { Context } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import { base64url, constantTimeEqual, hmac } from "../crypto.ts";
import type { ConsoleEnv } from "./page.ts";
import { fromBase64url } from "./session.ts";
import { signingKey } from "./sign-in.tsx";

export type Flash = { tone: "ok" | "error" | "info"; text: string };

const FLASH_COOKIE = "tg_console_flash";
const PURPOSE = "toolgate/console-flash/v1:";
const COOKIE = { httpOnly: true, secure: true, sameSite: "Strict", path: "/console" } as const;
const TONES = new Set<Flash["tone"]>(["ok", "error", "info"]);

export async function setFlash(c: Context<ConsoleEnv>, flash: Flash): Promise<void> {
  const payload = base64url(new TextEncoder().encode(JSON.stringify(flash)));
  const signature = await hmac(signingKey(c)!, `${PURPOSE}${c.get("session").sid}.${payload}`);
  setCookie(c, FLASH_COOKIE, `${payload}.${signature}`, { ...COOKIE, maxAge: 120 });
}

/** This session's pending message, if any (cleared as it is read); anything forged or foreign is ignored. */
export async function takeFlash(c: Context<ConsoleEnv>): Promise<Flash | null> {
  const value = getCookie(c, FLASH_COOKIE);
  if (value === undefined) return null;
  deleteCookie(c, FLASH_COOKIE, COOKIE);
  const [payload, signature, ...rest] = value.split(".");
  if (!payload || !signature || rest.length > 0) return null;
  const expected = await hmac(signingKey(c)!, `${PURPOSE}${c.get("session").sid}.${payload}`);
  if (!(await constantTimeEqual(signature, expected))) return null;
  try {
    const flash = JSON.parse(new TextDecoder().decode(fromBase64url(payload))) as Partial<Flash>;
    return typeof flash.text === "string" && flash.tone && TONES.has(flash.tone)
      ? { tone: flash.tone, text: flash.text }
      : null;
  } catch {
    return null;
  }
}
