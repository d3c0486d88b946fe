/**
 * Test doubles shared by the runtime suites. The test "service" is
 * grpc.health.v1.Health implemented by hand (we add no protos): `service`
 * in the request selects a behaviour. `serveDuringSuite` runs a service for
 * one describe block.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import { health } from "@trellis/contracts/grpc";
import { afterAll, beforeAll } from "vitest";
import { TrellisError } from "../src/errors.js";
import { createLogger, type Logger, type LogLevel } from "../src/logger.js";
import { requestIdOf } from "../src/request-id.js";
import {
  type CloseOptions,
  createService,
  type ServiceOptions,
  type TrellisService,
} from "../src/server.js";

export { sleep };

/** A logger whose lines are parsed into `lines`. */
export function captureLogger(
  service = "test",
  level: LogLevel = "debug",
): { logger: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger({
    service,
    level,
    write: (chunk) => {
      for (const line of chunk.split("\n")) if (line !== "") lines.push(JSON.parse(line));
    },
  });
  return { logger, lines };
}

const { SERVING } = health.HealthCheckResponse_ServingStatus;

/**
 * Behaviours by `req.service`:
 * - `""` or anything else: SERVING, with the request id echoed in `x-seen-request-id`
 * - `boom`: a TrellisError resource_not_found
 * - `crash`: a plain Error whose message must never reach the client
 * - `slow:<ms>`: waits, honouring the call's signal
 * - `connect-error`: a ConnectError PermissionDenied
 */
export function testHealthImpl(
  onCall?: (req: health.HealthCheckRequest) => void,
): Partial<ServiceImpl<typeof health.Health>> {
  return {
    async check(req, ctx) {
      onCall?.(req);
      ctx.responseHeader.set("x-seen-request-id", requestIdOf(ctx));
      if (req.service === "boom") {
        throw new TrellisError({
          reason: "resource_not_found",
          message: 'thing "t_1" was not found',
          metadata: { object: "thing", id: "t_1" },
        });
      }
      if (req.service === "crash")
        throw new Error("connection to db:5432 failed: secret-internals");
      if (req.service === "connect-error") throw new ConnectError("nope", Code.PermissionDenied);
      if (req.service.startsWith("slow:")) {
        await sleep(Number(req.service.slice(5)), undefined, { signal: ctx.signal });
      }
      return { status: SERVING };
    },
    async *watch(req) {
      onCall?.(req);
      yield { status: SERVING };
      await sleep(10);
      yield { status: SERVING };
    },
  };
}

/** A service started for one describe block; read `service` and `url` inside its tests. */
export interface SuiteService {
  readonly service: TrellisService;
  readonly url: string;
  /** The service's logger, and its lines parsed. */
  readonly logger: Logger;
  readonly lines: Record<string, unknown>[];
}

/**
 * Starts a service named "svc" (logging into `lines` at `level`) on a free
 * 127.0.0.1 port before the block's tests, and closes it with `close` after them.
 */
export function serveDuringSuite(
  options: Omit<ServiceOptions, "name" | "logger">,
  { level, close }: { level?: LogLevel; close?: CloseOptions } = {},
): SuiteService {
  const { logger, lines } = captureLogger("svc", level);
  let service: TrellisService | undefined;
  let url: string | undefined;
  beforeAll(async () => {
    service = createService({ name: "svc", logger, ...options });
    ({ url } = await service.listen({ host: "127.0.0.1", port: 0 }));
  });
  afterAll(() => service?.close(close));
  const started = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error("the suite's service starts in beforeAll");
    return value;
  };
  return {
    logger,
    lines,
    get service() {
      return started(service);
    },
    get url() {
      return started(url);
    },
  };
}
