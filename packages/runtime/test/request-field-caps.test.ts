// Per-field caps of RPC requests (issue 22 leftover: string caps applied on
// REST only). Ids, other strings and repeated fields past their caps are
// InvalidArgument naming the field, on ChatService, TaskService and the
// adapters' RegisterBackend / WorkerService requests, over gRPC and Connect
// (binary and JSON); maps and Struct values stay with the structure limits.
import { create, type DescMessage, type MessageInitShape } from "@bufbuild/protobuf";
import { reflect } from "@bufbuild/protobuf/reflect";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import {
  ConnectWorkerRequestSchema,
  RegisterBackendRequestSchema,
  ReportWorkEventsRequestSchema,
} from "@trellis/contracts/adapters";
import { SendRequestSchema } from "@trellis/contracts/chat";
import { SubmitTaskRequestSchema, TaskService } from "@trellis/contracts/tasks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { errorDetailOf } from "../src/errors.js";
import {
  defaultFieldCaps,
  type FieldCaps,
  fieldCapsFromEnv,
  findRequestViolation,
} from "../src/request-checks.js";
import { createService, type TrellisService } from "../src/server.js";
import { captureLogger } from "./support.js";

const caps: FieldCaps = { maxIdLength: 64, maxStringLength: 1_000, maxListLength: 5 };

function violation<D extends DescMessage>(desc: D, init: MessageInitShape<D>) {
  return findRequestViolation(reflect(desc, create(desc, init)), caps);
}

describe("findRequestViolation", () => {
  it("caps ids, other strings and lists, naming the field", () => {
    expect(violation(SendRequestSchema, { sessionId: "s".repeat(65) })).toMatchObject({
      path: "sessionId",
      problem: "id_length",
      max: 64,
    });
    expect(violation(SendRequestSchema, { sessionId: "s".repeat(64) })).toBeUndefined();
    expect(
      violation(SendRequestSchema, {
        sessionId: "ses_1",
        message: { parts: [{ kind: { case: "text", value: { text: "x".repeat(1_001) } } }] },
      }),
    ).toMatchObject({ path: "message.parts[0].text.text", problem: "string_length" });
    expect(
      violation(SendRequestSchema, {
        message: {
          parts: Array.from({ length: 6 }, () => ({
            kind: { case: "text" as const, value: { text: "x" } },
          })),
        },
      }),
    ).toMatchObject({ path: "message.parts", problem: "list_length", max: 5 });
    expect(violation(SubmitTaskRequestSchema, { agentId: "a".repeat(65) })).toMatchObject({
      path: "agentId",
      problem: "id_length",
    });
    expect(
      violation(RegisterBackendRequestSchema, { worker: { workerId: "w".repeat(65) } }),
    ).toMatchObject({ path: "worker.workerId", problem: "id_length" });
    expect(
      violation(ConnectWorkerRequestSchema, { worker: { backendId: "b".repeat(65) } }),
    ).toMatchObject({ path: "worker.backendId", problem: "id_length" });
    expect(
      violation(ReportWorkEventsRequestSchema, {
        work: { workerId: "w", executionId: "e" },
        events: Array.from({ length: 6 }, () => ({})),
      }),
    ).toMatchObject({ path: "events", problem: "list_length" });
  });

  it("still finds NUL first where no cap is passed, and leaves Struct values to the structure limits", () => {
    const nul = findRequestViolation(
      reflect(SubmitTaskRequestSchema, create(SubmitTaskRequestSchema, { agentId: "a\u0000b" })),
    );
    expect(nul).toMatchObject({ path: "agentId", problem: "nul" });
    const long = findRequestViolation(
      reflect(
        SubmitTaskRequestSchema,
        create(SubmitTaskRequestSchema, { agentId: "a".repeat(10_000) }),
      ),
    );
    expect(long).toBeUndefined();
  });

  it("reads its settings from the environment, refusing nonsense", () => {
    expect(fieldCapsFromEnv({})).toEqual(defaultFieldCaps);
    expect(fieldCapsFromEnv({ TRELLIS_MAX_RPC_ID_LENGTH: "128" }).maxIdLength).toBe(128);
    expect(() => fieldCapsFromEnv({ TRELLIS_MAX_RPC_LIST_LENGTH: "1" })).toThrow(
      /TRELLIS_MAX_RPC_LIST_LENGTH/,
    );
  });
});

describe("field caps over the wire", () => {
  let service: TrellisService;
  let url = "";
  let served = 0;

  beforeAll(async () => {
    const { logger } = captureLogger();
    service = createService({
      name: "svc",
      logger,
      env: {
        TRELLIS_MAX_RPC_ID_LENGTH: "64",
        TRELLIS_MAX_RPC_STRING_LENGTH: "65536",
        TRELLIS_MAX_RPC_LIST_LENGTH: "100",
      },
      routes: (router) => {
        router.service(TaskService, {
          async submitTask() {
            served += 1;
            return {};
          },
        });
      },
    });
    ({ url } = await service.listen({ host: "127.0.0.1", port: 0 }));
  }, 60_000);
  afterAll(async () => {
    await service?.close({ graceMs: 500 });
  });

  const transports = () => ({
    grpc: createGrpcTransport({ baseUrl: url }),
    connect: createConnectTransport({ baseUrl: url, httpVersion: "1.1" }),
    "connect+json": createConnectTransport({
      baseUrl: url,
      httpVersion: "1.1",
      useBinaryFormat: false,
    }),
  });

  it("refuses each oversized field with InvalidArgument naming it; the handler never runs", async () => {
    for (const [name, transport] of Object.entries(transports())) {
      const client = createClient(TaskService, transport);
      const cases: [MessageInitShape<typeof SubmitTaskRequestSchema>, string][] = [
        [{ sessionId: "s".repeat(65) }, "sessionId"],
        [{ agentId: "a".repeat(1_000) }, "agentId"],
        [
          {
            input: { parts: [{ kind: { case: "text", value: { text: "x".repeat(65_537) } } }] },
          },
          "input.parts[0].text.text",
        ],
        [
          {
            input: {
              parts: Array.from({ length: 101 }, () => ({
                kind: { case: "text" as const, value: { text: "x" } },
              })),
            },
          },
          "input.parts",
        ],
      ];
      for (const [request, field] of cases) {
        const before = served;
        const error = await client.submitTask(request).then(
          () => undefined,
          (e: unknown) => ConnectError.from(e),
        );
        expect(error?.code, `${name} ${field}`).toBe(Code.InvalidArgument);
        const detail = error ? errorDetailOf(error) : undefined;
        expect(detail?.reason, `${name} ${field}`).toBe("invalid_request");
        expect(detail?.param, `${name} ${field}`).toBe(field);
        expect(served).toBe(before);
      }
      await client.submitTask({ sessionId: "s".repeat(64) });
    }
    expect(served).toBe(3);
  });
});
