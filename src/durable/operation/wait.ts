// Callers waiting for an operation to settle (a submit's or a get's wait): woken by every committed
// transition, they return once `waitIsOver` (domain/wait.ts): settled, its next self-driven step
// due after their deadline (a retry or resend far ahead), the deadline, or — a default wait — only
// a person's decision left to wait for. Memory only.
import { waitIsOver, type Wait } from "../../domain/wait.ts";
import type { OperationLog } from "./log.ts";

export class Waiters {
  private readonly listeners = new Set<() => void>();

  constructor(private readonly log: OperationLog) {}

  /** Waits up to `wait.ms` from now, until the wait is over (see the header). */
  async waitFor({ ms, holdForPeople }: Wait): Promise<void> {
    const deadlineMs = Date.now() + ms;
    for (;;) {
      const head = this.log.head();
      if (!head) return;
      const nowMs = Date.now();
      if (waitIsOver(head.state, head.frozen.plan, nowMs, deadlineMs, holdForPeople)) return;
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          this.listeners.delete(done);
          resolve();
        };
        const timer = setTimeout(done, deadlineMs - nowMs);
        this.listeners.add(done);
      });
    }
  }

  notify(): void {
    for (const listener of [...this.listeners]) listener();
  }
}
