// A resource lock is one row: who it belongs to (tenant + resource, checked on every call) and the
// whole lock state (holder, FIFO queue, last fencing token), so one transition writes one row.
export const LOCK_SCHEMA = `
CREATE TABLE IF NOT EXISTS lock (k INTEGER PRIMARY KEY CHECK (k = 1), tenant_id TEXT NOT NULL, resource TEXT NOT NULL, state TEXT NOT NULL, updated_at INTEGER NOT NULL);`;
