// Starts the fault-injecting upstream on loopback for the whole integration suite.
import type { TestProject } from "vitest/node";
import { startUpstream } from "../../demo/upstream.ts";

export default async function setup(project: TestProject) {
  const upstream = await startUpstream();
  project.provide("upstreamUrl", upstream.url);
  return () => upstream.close();
}

declare module "vitest" {
  export interface ProvidedContext {
    upstreamUrl: string;
  }
}
