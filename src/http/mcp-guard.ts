// DNS-rebinding protection in front of /mcp (MCP Streamable HTTP: servers MUST validate Origin).
// A rebound page is same-origin with its own name, so the Host is checked too: in development
// (loopback) only loopback names or TOOLGATE_MCP_ALLOWED_HOSTS; in production only the listed
// hosts when the list is set, since Cloudflare serves a Worker only on its own routes, and a
// rebound name never reaches it. A browser Origin must be the request's own host or listed in
// TOOLGATE_MCP_ALLOWED_ORIGINS (hostnames); a request without Origin is not a browser's.
import {
  localhostAllowedHostnames,
  validateHostHeader,
  validateOriginHeader,
} from "@modelcontextprotocol/server";
import type { Env } from "../durable/env.ts";
import type { ApiError } from "./problem.ts";
import { isDevelopment, mcpAllowLists } from "../config.ts";

function hostnameOf(host: string): string {
  try {
    return new URL(`http://${host}`).hostname;
  } catch {
    return ""; // validateHostHeader refuses the same text as an invalid Host
  }
}

export function mcpGuard(env: Env, host: string, origin: string | null): ApiError | null {
  const listed = mcpAllowLists(env);
  const hosts =
    listed.hosts.length > 0
      ? listed.hosts
      : isDevelopment(env)
        ? localhostAllowedHostnames()
        : null;
  const checked = validateHostHeader(host, hosts ?? [hostnameOf(host)]);
  if (!checked.ok) return { code: "host_not_allowed", detail: `${checked.message} for /mcp` };
  const origins = [checked.hostname, ...listed.origins];
  const allowed = validateOriginHeader(origin, origins);
  return allowed.ok
    ? null
    : {
        code: "origin_not_allowed",
        detail: `${allowed.message}: this origin may not call /mcp (TOOLGATE_MCP_ALLOWED_ORIGINS)`,
      };
}
