// Callers waiting for an operation to settle (a submit's or a get's `waitMs`): woken by every
// committed transition, they return once it is settled, when its next self-driven step is due
// after their deadline (a retry or resend far ahead), or at the deadline. Memory only.
import { isSettled } from "../../domain/operation/index.ts";
import type { OperationLog } from "./log.ts";

export class Waiters {
  private readonly listeners = new Set<() => void>();

  constructor(private readonly log: OperationLog) {}

  /** Waits until settled, or until the next self-driven step is due after the deadline. */
  async waitFor(deadlineMs: number): Promise<void> {
    for (;;) {
      const state = this.log.head()?.state;
      if (!state || isSettled(state)) return;
      const due =
        state.phase === "retry_scheduled" || state.phase === "outcome_unknown"
          ? state.dueAtMs
          : null;
      if (
        (state.phase === "retry_scheduled" || state.phase === "outcome_unknown") &&
        (due === null || due > deadlineMs)
      )
        return;
      const remainingMs = deadlineMs - Date.now();
      if (remainingMs <= 0) return;
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          this.listeners.delete(done);
          resolve();
        };
        const timer = setTimeout(done, remainingMs);
        this.listeners.add(done);
      });
    }
  }

  notify(): void {
    for (const listener of [...this.listeners]) listener();
  }
}
