// What a console page is. A page is one file that exports `definePage({ nav, routes })`: its own
// Hono routes (GET renders; any POST is already CSRF-checked by the console app) and, optionally,
// a link in the header navigation. Register it in pages.ts; the layout builds the nav from there.
import { Hono } from "hono";
import type { Env } from "../durable/env.ts";
import type { ApiScope } from "../http/schemas.ts";

/** The signed-in person, re-verified against the tenant on this request. */
export type ConsoleSession = {
  sid: string;
  tenantId: string;
  keyId: string;
  keyName: string;
  /** The key's current scopes, narrowed to the snapshot taken at sign-in. */
  scopes: ApiScope[];
  expiresAtMs: number;
  /** The token every form of this session carries in its hidden `csrf` field. */
  csrf: string;
};

export type ConsoleEnv = { Bindings: Env; Variables: { session: ConsoleSession; nav: NavLink[] } };
export type NavLink = { label: string; href: string };

export type ConsolePage = {
  nav: NavLink | null;
  /** Routes relative to /console, e.g. `.get("/runs/:run_id", …)`. */
  routes: Hono<ConsoleEnv>;
};

export const definePage = (page: ConsolePage): ConsolePage => page;
export const consoleRoutes = () => new Hono<ConsoleEnv>();
