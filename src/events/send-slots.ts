// The webhook requests of one queue consumer invocation, across all its tenants (issue 38, E4). A
// Worker invocation has 6 connections that may wait for response headers at once; a 7th waits for
// one of them (https://developers.cloudflare.com/workers/platform/limits/#simultaneous-open-connections
// — not enforced by workerd). So the requests take turns here instead: at most CONNECTIONS at once
// and PER_ENDPOINT per endpoint; a freed slot goes to the waiting endpoint with the fewest requests
// in flight (failing endpoints after the others, then the longest waiting), and a request's timeout
// starts when it gets its slot. An endpoint whose request timed out gets no other request in this
// invocation (`hang`): its remaining sends are failed attempts, not sent. So a hanging endpoint
// holds at most PER_ENDPOINT slots for one timeout, and never times out another endpoint's request.

export const CONNECTIONS = 6;
export const PER_ENDPOINT = 2;

type Waiting = { key: string; later: boolean; start: () => void };

export class SendSlots {
  private readonly waiting: Waiting[] = [];
  private readonly inFlight = new Map<string, number>();
  private running = 0;
  private readonly hungKeys = new Set<string>();

  constructor(
    private readonly connections = CONNECTIONS,
    private readonly perEndpoint = PER_ENDPOINT,
  ) {}

  /**
   * Runs `task` once a slot is free for `key` (an endpoint, unique across tenants); `later`: the
   * endpoint is failing, so anyone else waiting goes first. The slot is held until `task` settles.
   */
  run<T>(key: string, later: boolean, task: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.waiting.push({
        key,
        later,
        start: () => {
          this.running += 1;
          this.inFlight.set(key, (this.inFlight.get(key) ?? 0) + 1);
          task()
            .then(resolve, reject)
            .finally(() => {
              this.running -= 1;
              this.inFlight.set(key, this.inFlight.get(key)! - 1);
              this.pump();
            });
        },
      });
      this.pump();
    });
  }

  /** `key` let a request time out: its other sends in this invocation are not made. */
  hang(key: string): void {
    this.hungKeys.add(key);
  }

  hung(key: string): boolean {
    return this.hungKeys.has(key);
  }

  private pump(): void {
    while (this.running < this.connections) {
      const index = nextToStart(this.waiting, this.inFlight, this.perEndpoint);
      if (index < 0) return;
      const [next] = this.waiting.splice(index, 1);
      next!.start();
    }
  }
}

/**
 * Which waiting send starts in a free slot (-1: none may): among those whose endpoint is under its
 * cap, healthy endpoints before failing ones, then the endpoint with the fewest in flight, then the
 * one waiting longest (the list is in arrival order).
 */
export function nextToStart(
  waiting: ReadonlyArray<{ key: string; later: boolean }>,
  inFlight: ReadonlyMap<string, number>,
  perEndpoint: number,
): number {
  let best = -1;
  let bestRank: [number, number] | null = null;
  waiting.forEach((candidate, index) => {
    const flying = inFlight.get(candidate.key) ?? 0;
    if (flying >= perEndpoint) return;
    const rank: [number, number] = [candidate.later ? 1 : 0, flying];
    if (!bestRank || rank[0] < bestRank[0] || (rank[0] === bestRank[0] && rank[1] < bestRank[1])) {
      best = index;
      bestRank = rank;
    }
  });
  return best;
}
