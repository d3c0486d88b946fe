/**
 * A minimal unbounded async queue: producers `push`, one consumer iterates.
 * Used where a callback-style source (NATS consume callbacks) must become an
 * async iterator whose buffered items we can still reach (to nak them on close).
 */
export class AsyncQueue<T> implements AsyncIterable<T> {
  #items: T[] = [];
  #head = 0;
  #ended = false;
  #error: unknown;
  #wake: (() => void) | undefined;

  /** Add an item; ignored after {@link end}. */
  push(item: T): void {
    if (this.#ended) return;
    this.#items.push(item);
    this.#signal();
  }

  /** Finish the queue: the iterator drains what is buffered, then ends (or throws `error`). */
  end(error?: unknown): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#error = error;
    this.#signal();
  }

  /** Finish at once, dropping whatever is buffered. */
  close(): void {
    this.drain();
    this.end();
  }

  get ended(): boolean {
    return this.#ended;
  }

  /** Remove and return everything buffered. */
  drain(): T[] {
    const rest = this.#items.slice(this.#head);
    this.#items = [];
    this.#head = 0;
    return rest;
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T, void, undefined> {
    for (;;) {
      if (this.#head < this.#items.length) {
        const item = this.#items[this.#head] as T;
        this.#head++;
        // Compact now and then so a long-lived queue does not grow forever.
        if (this.#head > 1024 && this.#head * 2 > this.#items.length) {
          this.#items = this.#items.slice(this.#head);
          this.#head = 0;
        }
        yield item;
        continue;
      }
      if (this.#ended) {
        if (this.#error !== undefined) throw this.#error;
        return;
      }
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
      });
    }
  }

  #signal(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }
}

/**
 * Resolves when `changed` settles or `signal` aborts, and leaves nothing
 * behind on either. (Racing a long-lived abort promise instead keeps one
 * reaction on it per wait, ~300 bytes each, for as long as the subscription
 * lives: a slow leak in every long-lived subscriber.)
 */
export function changedOrAborted(
  changed: Promise<void>,
  signal: AbortSignal | undefined,
): Promise<void> {
  if (!signal) return changed;
  if (signal.aborted) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const done = () => {
      signal.removeEventListener("abort", done);
      resolve();
    };
    signal.addEventListener("abort", done, { once: true });
    changed.then(done, done);
  });
}
