// Types for receipts.mjs (the offline verifier), for its tests.
export const RECEIPT_TYPE: "toolgate.receipt/v1";
export function canonicalize(value: unknown): string;
export function sha256Hex(text: string): Promise<string>;
export type Problem = { index: number; operation_id: string | null; reason: string };
export function readJwks(
  jwks: unknown,
): Promise<Map<string, { key: CryptoKey; notBeforeMs: number; notAfterMs: number }>>;
export function receiptsOf(document: unknown): { tenant: string | null; receipts: any[] };
export function verifyReceipts(document: unknown, jwks: unknown): Promise<Problem[]>;
