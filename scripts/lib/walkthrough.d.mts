// Types for walkthrough.mjs, for its tests.
export type WalkthroughValues = {
  TG: string;
  UP: string;
  TENANT: string;
  ADMIN: string;
  KEY: string;
  RUN: string;
  RT: string;
};
export const FAULTS: string;
export const README_VALUES: WalkthroughValues;
export const README: string;
export const START: string;
export const END: string;
export function walkthrough(values: WalkthroughValues): string;
export function readmeWithWalkthrough(text: string): string;
