import { createHash } from "node:crypto";
import type { JsonValue } from "@bufbuild/protobuf";
import type { JetStreamClient, JetStreamManager, StoredMsg } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { encodeToken, signalTokens, validateSignalPrefix } from "../address.js";
import { closedError, invalidRequest } from "../errors.js";
import type { ReceivedSignal, Signal, SignalBus, SignalSubscribeOptions } from "../event-log.js";
import {
  closeConnection,
  natsError,
  openPrefixedStream,
  type PrefixedStream,
  type StreamOptions,
} from "./connection.js";
import { consumeDurable } from "./durable.js";

/** Options of {@link JetStreamSignalBus.open}. */
export interface JetStreamSignalBusOptions extends StreamOptions {
  /** An open connection; shared with other users unless `ownsConnection`. */
  connection: NatsConnection;
  /** First subject token(s): signals go to `<prefix>.signals.…` (default `"trellis"`). */
  prefix?: string;
  /** Stream name (default `<PREFIX>_SIGNALS`). */
  streamName?: string;
  /** JetStream API and publish timeout (default 5000 ms). */
  requestTimeoutMs?: number;
  /** Close the connection in {@link JetStreamSignalBus.close} (default false). */
  ownsConnection?: boolean;
}

/** The JSON body of a signal message. */
interface SignalBody {
  signalId: string;
  deliveryId: string;
  payload: JsonValue;
  deliveredAt: string;
}

function toSignal(data: Uint8Array): Signal {
  const body = JSON.parse(new TextDecoder().decode(data)) as SignalBody;
  return {
    signalId: body.signalId,
    deliveryId: body.deliveryId,
    payload: body.payload,
    deliveredAt: new Date(body.deliveredAt),
  };
}

/**
 * The production {@link SignalBus} on NATS JetStream.
 *
 * One stream `<PREFIX>_SIGNALS` over `<prefix>.signals.>`; a signal is one
 * message on `<prefix>.signals.<segments of the signal id>` with a JSON body
 * and `Nats-Msg-Id` = delivery id (dedupe within the duplicate window).
 * `get` is a direct get of the subject's first message; `subscribe` is a
 * durable pull consumer per `(group, prefix)`, shared by every replica that
 * subscribes with them (competing consumers).
 */
export class JetStreamSignalBus implements SignalBus {
  /** The stream holding the signals. */
  readonly streamName: string;
  /** The subject prefix. */
  readonly prefix: string;

  readonly #nc: NatsConnection;
  readonly #js: JetStreamClient;
  readonly #jsm: JetStreamManager;
  readonly #ownsConnection: boolean;
  readonly #live = new Set<{ end(): void }>();
  #closed = false;

  private constructor(options: JetStreamSignalBusOptions, stream: PrefixedStream) {
    this.prefix = stream.prefix;
    this.streamName = stream.streamName;
    this.#nc = options.connection;
    this.#js = stream.js;
    this.#jsm = stream.jsm;
    this.#ownsConnection = options.ownsConnection ?? false;
  }

  /** Connect to JetStream and create (or update) the signal stream. */
  static async open(options: JetStreamSignalBusOptions): Promise<JetStreamSignalBus> {
    return new JetStreamSignalBus(options, await openPrefixedStream(options, "signals", "SIGNALS"));
  }

  async deliver(input: { signalId: string; deliveryId?: string; payload: JsonValue }): Promise<{
    duplicate: boolean;
  }> {
    this.#assertOpen();
    if (!input.signalId) throw invalidRequest("a signal needs a signal id", "signal_id");
    const deliveryId = input.deliveryId || input.signalId;
    const body: SignalBody = {
      signalId: input.signalId,
      deliveryId,
      payload: input.payload,
      deliveredAt: new Date().toISOString(),
    };
    try {
      const ack = await this.#js.publish(this.#subject(input.signalId), JSON.stringify(body), {
        msgID: deliveryId,
      });
      return { duplicate: ack.duplicate };
    } catch (err) {
      throw natsError(err);
    }
  }

  async get(signalId: string): Promise<Signal | undefined> {
    this.#assertOpen();
    let msg: StoredMsg | null;
    try {
      // The subject's first message: the first delivery, for a waiter that starts late.
      msg = await this.#jsm.direct.getMessage(this.streamName, {
        seq: 0,
        next_by_subj: this.#subject(signalId),
      });
    } catch (err) {
      throw natsError(err);
    }
    return msg ? toSignal(msg.data) : undefined;
  }

  async *subscribe(
    options: SignalSubscribeOptions,
  ): AsyncGenerator<ReceivedSignal, void, undefined> {
    this.#assertOpen();
    validateSignalPrefix(options.prefix);
    if (!options.group) throw invalidRequest("a signal subscription needs a group", "group");
    const filter =
      options.prefix === ""
        ? `${this.prefix}.signals.>`
        : `${this.prefix}.signals.${signalTokens(options.prefix.slice(0, -1))}.>`;
    // Durable state per (group, prefix): a readable group token plus a short
    // hash of the prefix keeps names valid and distinct.
    const prefixHash = createHash("sha256").update(options.prefix).digest("base64url").slice(0, 10);
    const deliveries = consumeDurable({
      nc: this.#nc,
      js: this.#js,
      jsm: this.#jsm,
      stream: this.streamName,
      durable: `${encodeToken(options.group)}-${prefixHash}`,
      filterSubject: filter,
      ackWaitMs: options.ackWaitMs ?? 30_000,
      // Signals are few and handlers compete: do not pull many ahead.
      maxMessages: 8,
      ...(options.signal ? { signal: options.signal } : {}),
      live: this.#live,
    });
    for await (const delivery of deliveries) {
      yield { ...toSignal(delivery.msg.data), ack: delivery.ack };
    }
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const live of [...this.#live]) live.end();
    if (this.#ownsConnection) await closeConnection(this.#nc);
  }

  #subject(signalId: string): string {
    return `${this.prefix}.signals.${signalTokens(signalId)}`;
  }

  #assertOpen(): void {
    if (this.#closed) throw closedError("signal bus");
  }
}
