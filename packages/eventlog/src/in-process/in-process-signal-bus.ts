import type { JsonValue } from "@bufbuild/protobuf";
import { validateSignalPrefix } from "../address.js";
import { invalidRequest } from "../errors.js";
import type { ReceivedSignal, Signal, SignalBus, SignalSubscribeOptions } from "../event-log.js";
import { assertOpen, DurableCursor, Journal } from "./journal.js";

/** Options of {@link InProcessSignalBus}. */
export interface InProcessSignalBusOptions {
  /** Default redelivery delay of an unacked signal (30 s). */
  defaultAckWaitMs?: number;
}

/**
 * The embedded-mode {@link SignalBus}: signals in memory, groups as durable
 * cursors over one list. Signals do not survive a restart; the services that
 * wait on signals keep what they need (task state) in the database.
 */
export class InProcessSignalBus implements SignalBus {
  readonly #journal = new Journal<Signal>();
  readonly #byDelivery = new Set<string>();
  readonly #first = new Map<string, Signal>();
  readonly #groups = new Map<string, DurableCursor<Signal>>();
  readonly #defaultAckWaitMs: number;

  constructor(options: InProcessSignalBusOptions = {}) {
    this.#defaultAckWaitMs = options.defaultAckWaitMs ?? 30_000;
  }

  async deliver(input: { signalId: string; deliveryId?: string; payload: JsonValue }): Promise<{
    duplicate: boolean;
  }> {
    assertOpen(this.#journal, "signal bus");
    if (!input.signalId) throw invalidRequest("a signal needs a signal id", "signal_id");
    const deliveryId = input.deliveryId || input.signalId;
    if (this.#byDelivery.has(deliveryId)) return { duplicate: true };
    // Store a JSON copy: what a subscriber gets must not change under it, and
    // it is what the JetStream bus would hand back too.
    const signal: Signal = {
      signalId: input.signalId,
      deliveryId,
      payload: JSON.parse(JSON.stringify(input.payload)) as JsonValue,
      deliveredAt: new Date(),
    };
    this.#byDelivery.add(deliveryId);
    if (!this.#first.has(signal.signalId)) this.#first.set(signal.signalId, signal);
    this.#journal.push(signal);
    this.#journal.changed.notify();
    return { duplicate: false };
  }

  async get(signalId: string): Promise<Signal | undefined> {
    assertOpen(this.#journal, "signal bus");
    return this.#first.get(signalId);
  }

  async *subscribe(
    options: SignalSubscribeOptions,
  ): AsyncGenerator<ReceivedSignal, void, undefined> {
    assertOpen(this.#journal, "signal bus");
    validateSignalPrefix(options.prefix);
    if (!options.group) throw invalidRequest("a signal subscription needs a group", "group");
    const cursor = this.#group(options);
    const held = new Set<bigint>();
    try {
      for (;;) {
        const delivery = await cursor.take(options.signal);
        if (!delivery) return;
        const { entry } = delivery;
        held.add(entry.position);
        yield {
          ...entry.value,
          ack: async () => {
            held.delete(entry.position);
            await cursor.ack(entry.position);
          },
        };
      }
    } finally {
      for (const position of held) cursor.nak(position);
    }
  }

  #group(options: SignalSubscribeOptions): DurableCursor<Signal> {
    // Durable state per (group, prefix), like the JetStream bus' consumer name.
    const key = `${options.group}\u0000${options.prefix}`;
    const ackWaitMs = options.ackWaitMs ?? this.#defaultAckWaitMs;
    let cursor = this.#groups.get(key);
    if (!cursor) {
      const prefix = options.prefix;
      cursor = new DurableCursor<Signal>(
        key,
        this.#journal,
        (s) => s.signalId.startsWith(prefix),
        ackWaitMs,
        0n,
        undefined,
      );
      this.#groups.set(key, cursor);
    }
    cursor.ackWaitMs = ackWaitMs;
    return cursor;
  }

  async close(): Promise<void> {
    if (this.#journal.closed) return;
    this.#journal.close();
    for (const cursor of this.#groups.values()) cursor.dispose();
  }
}
