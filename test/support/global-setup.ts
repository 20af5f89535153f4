// Starts the fault-injecting upstream on loopback for the whole integration suite.
import type { TestProject } from "vitest/node";
import { startUpstream } from "../../demo/upstream.ts";

export default async function setup(project: TestProject) {
  const upstream = await startUpstream();
  project.provide("upstreamUrl", upstream.url);
  // `npm run soak` passes SOAK_SEED / SOAK_OPS; workerd has no process.env, so they travel as a binding.
  project.provide("soakConfig", {
    seed: process.env.SOAK_SEED ?? null,
    ops: process.env.SOAK_OPS ?? null,
  });
  return () => upstream.close();
}

declare module "vitest" {
  export interface ProvidedContext {
    upstreamUrl: string;
    soakConfig: { seed: string | null; ops: string | null };
  }
}
