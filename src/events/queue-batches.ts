// Every sendBatch to a Cloudflare queue is cut to the platform's limits (issue 38, E5): at most 100
// messages and 256 KB in all per call (https://developers.cloudflare.com/queues/platform/limits/);
// a larger batch is refused whole, and an outbox that resends the same rows would be refused for
// ever. Sizes are counted as the UTF-8 bytes of each JSON body plus a margin for its envelope. The
// cut is pure; `sendInBatches` sends the parts one after another and says which went.

export const QUEUE_BATCH_MAX_MESSAGES = 100;
/** 256 KB, less a margin for what the platform adds around each body. */
export const QUEUE_BATCH_MAX_BYTES = 250_000;
const ENVELOPE_BYTES = 100;

const encoder = new TextEncoder();
export const messageBytes = (body: unknown): number =>
  encoder.encode(JSON.stringify(body)).byteLength + ENVELOPE_BYTES;

/**
 * An upper bound of the bytes of a message whose body is `text` wrapped in at most `wrapChars`
 * characters of JSON: a UTF-16 code unit is at most 3 UTF-8 bytes. For a sender that holds the
 * stored JSON of what it sends, so sizing costs no stringify and no encoding per message.
 */
export const boundedBytes = (text: string, wrapChars = 64): number =>
  3 * (text.length + wrapChars) + ENVELOPE_BYTES;

/**
 * `items` in order, cut into runs of at most 100 whose bodies add up to at most 250,000 bytes;
 * `bytesOf`: each item's size or an upper bound of it (default: its body's JSON, encoded).
 */
export function queueBatches<T>(
  items: readonly T[],
  bodyOf: (item: T) => unknown,
  bytesOf: (item: T) => number = (item) => messageBytes(bodyOf(item)),
): T[][] {
  const batches: T[][] = [];
  let current: T[] = [];
  let bytes = 0;
  for (const item of items) {
    const size = bytesOf(item);
    if (
      current.length > 0 &&
      (current.length >= QUEUE_BATCH_MAX_MESSAGES || bytes + size > QUEUE_BATCH_MAX_BYTES)
    ) {
      batches.push(current);
      current = [];
      bytes = 0;
    }
    current.push(item);
    bytes += size;
  }
  if (current.length > 0) batches.push(current);
  return batches;
}

/**
 * Sends `items` (each as the message `requestOf` makes: body, content type, delay) in batches within
 * the limits, in order; `sent` is called with each batch once the queue took it (so an outbox marks
 * exactly those rows). Throws the first refusal: the batches after it are not sent.
 */
export async function sendInBatches<T, Body>(
  queue: Pick<Queue<Body>, "sendBatch">,
  items: readonly T[],
  requestOf: (item: T) => MessageSendRequest<Body>,
  sent: (batch: T[]) => void = () => {},
  bytesOf?: (item: T) => number,
): Promise<void> {
  for (const batch of queueBatches(items, (item) => requestOf(item).body, bytesOf)) {
    await queue.sendBatch(batch.map(requestOf));
    sent(batch);
  }
}
