// Types for verify-table.mjs, for its unit test.
export function parseArgs(argv: string[]):
  | { error: string }
  | {
      manifest: string;
      arguments: Record<string, unknown>;
      context: Record<string, unknown>;
      baseUrl: string | null;
      tool: string | null;
      upstreamUrl: string | null;
      error?: undefined;
    };
export function formatTable(
  name: string,
  verification: {
    status: string;
    summary?: string;
    checked_at: string | null;
    base_url: string | null;
    checks: Array<{ name: string; status: string; observed: string }>;
  },
  width?: number,
): string;
export function fillUpstream(text: string, upstreamUrl: string): string;
export function pickManifest(
  text: string,
  file: string,
  options?: { tool?: string | null; upstreamUrl?: string },
): { name: string } & Record<string, unknown>;
