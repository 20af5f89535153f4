// A limit across runs (issue 21): one meta row (whose it is, the last definition it was asked with,
// the longest window it was ever asked with) and one row per operation that reserved, keyed by
// operation id (so reserving again is a no-op). `confirmed`: the operation was seen holding it;
// `touched`: reserved again while held (a sweep that asked before that must not release it);
// `recorded_at_ms`: when its operation was recorded, once the sweep learned it (null: not yet — it
// counts); `ask_at_ms`: when the sweep asks the operation next.
export const LIMIT_SCHEMA = `
CREATE TABLE IF NOT EXISTS limit_meta (k INTEGER PRIMARY KEY CHECK (k = 1), tenant_id TEXT NOT NULL, name TEXT NOT NULL, subject TEXT NOT NULL, max REAL NOT NULL, window_ms INTEGER NOT NULL, longest_window_ms INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS reservation (operation_id TEXT PRIMARY KEY, amount REAL NOT NULL, at_ms INTEGER NOT NULL, state TEXT NOT NULL, confirmed INTEGER NOT NULL DEFAULT 0, touched INTEGER NOT NULL DEFAULT 0, recorded_at_ms INTEGER, ask_at_ms INTEGER NOT NULL DEFAULT 0);`;

/** Added to older objects' tables on their next write (SqlStore.ensureColumn). */
export const LIMIT_ADDED_COLUMNS = {
  limit_meta: ["longest_window_ms INTEGER NOT NULL DEFAULT 0"],
  reservation: ["recorded_at_ms INTEGER", "ask_at_ms INTEGER NOT NULL DEFAULT 0"],
} as const;
