import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { create, fromBinary } from "@bufbuild/protobuf";
import { type FileDescriptorProto, FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { Code, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { file_trellis_core_v1_event } from "@trellis/contracts/core";
import { reflectionV1, reflectionV1alpha } from "@trellis/contracts/grpc";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createService, type TrellisService } from "../src/server.js";
import { captureLogger } from "./support.js";

const run = promisify(execFile);
const buf = fileURLToPath(new URL("../../../node_modules/.bin/buf", import.meta.url));

const builtinServices = [
  "grpc.health.v1.Health",
  "grpc.reflection.v1.ServerReflection",
  "grpc.reflection.v1alpha.ServerReflection",
];

describe("server reflection", () => {
  let service: TrellisService;
  let url: string;

  beforeAll(async () => {
    service = createService({
      name: "reflected",
      logger: captureLogger().logger,
      // A message-only contract whose file imports well-known types.
      reflection: { files: [file_trellis_core_v1_event] },
    });
    ({ url } = await service.listen({ host: "127.0.0.1" }));
  });
  afterAll(() => service.close({ graceMs: 1000 }));

  describe("with buf curl (a stock client)", () => {
    for (const protocol of ["grpc-v1", "grpc-v1alpha"]) {
      // buf curl over gRPC, its schema read with this reflection protocol.
      const curl = (...args: string[]) =>
        run(
          buf,
          [
            "curl",
            "--protocol",
            "grpc",
            "--http2-prior-knowledge",
            "--reflect-protocol",
            protocol,
            ...args,
          ],
          { timeout: 30_000 },
        );

      it(`lists services over ${protocol}`, async () => {
        const { stdout } = await curl("--list-services", url);
        expect(stdout.trim().split("\n").sort()).toEqual(builtinServices);
      });

      it(`calls Health/Check with the schema from ${protocol}`, async () => {
        const { stdout } = await curl("-d", '{"service":""}', `${url}/grpc.health.v1.Health/Check`);
        expect(JSON.parse(stdout)).toEqual({ status: "SERVING" });
      });
    }

    it("lists methods (resolves the service's file by symbol)", async () => {
      const { stdout } = await run(
        buf,
        ["curl", "--http2-prior-knowledge", "--list-methods", url],
        { timeout: 30_000 },
      );
      expect(stdout).toContain("grpc.health.v1.Health/Watch");
      expect(stdout).toContain("grpc.reflection.v1.ServerReflection/ServerReflectionInfo");
    });

    it("reports a NotFound from the server with buf curl's exit code", async () => {
      const failed = await run(
        buf,
        [
          "curl",
          "--protocol",
          "grpc",
          "-d",
          '{"service":"nope"}',
          `${url}/grpc.health.v1.Health/Check`,
        ],
        { timeout: 30_000 },
      ).then(
        () => undefined,
        (e: { code: number; stderr: string }) => e,
      );
      expect(failed?.stderr).toContain("not_found");
    });
  });

  describe("protocol details", () => {
    for (const [version, svc] of [
      ["v1", reflectionV1.ServerReflection],
      ["v1alpha", reflectionV1alpha.ServerReflection],
    ] as const) {
      it(`answers symbol, file and error requests on one ${version} stream`, async () => {
        // v1alpha is wire-identical to v1, so one typed request list drives both.
        const client = createClient(
          svc as typeof reflectionV1.ServerReflection,
          createGrpcTransport({ baseUrl: url }),
        );
        const requests: reflectionV1.ServerReflectionRequest["messageRequest"][] = [
          { case: "fileContainingSymbol", value: "trellis.core.v1.Event" },
          { case: "fileContainingSymbol", value: "trellis.core.v1.ErrorDetail" },
          {
            case: "fileContainingSymbol",
            value: "grpc.health.v1.HealthCheckResponse.ServingStatus",
          },
          { case: "fileContainingSymbol", value: "grpc.health.v1.Health.Check" },
          { case: "fileByFilename", value: "google/protobuf/timestamp.proto" },
          { case: "fileContainingSymbol", value: "no.such.Thing" },
          { case: "fileByFilename", value: "no/such.proto" },
          { case: "listServices", value: "" },
        ];
        async function* send() {
          for (const messageRequest of requests) {
            yield create(reflectionV1.ServerReflectionRequestSchema, {
              host: "h",
              messageRequest,
            });
          }
        }
        const answers: reflectionV1.ServerReflectionResponse["messageResponse"][] = [];
        for await (const res of client.serverReflectionInfo(send())) {
          expect(res.validHost).toBe("h");
          answers.push(res.messageResponse);
        }
        const files = (i: number): FileDescriptorProto[] => {
          const answer = answers[i];
          if (answer?.case !== "fileDescriptorResponse")
            throw new Error(`answer ${i}: ${answer?.case}`);
          return answer.value.fileDescriptorProto.map((b) =>
            fromBinary(FileDescriptorProtoSchema, b),
          );
        };
        // The file first, then its transitive imports, well-known types included.
        const event = files(0);
        expect(event[0]?.name).toBe("trellis/core/v1/event.proto");
        expect(event.map((f) => f.name).sort()).toEqual([
          // error.proto's RpcStatus carries google.protobuf.Any details.
          "google/protobuf/any.proto",
          "google/protobuf/struct.proto",
          "google/protobuf/timestamp.proto",
          "trellis/core/v1/error.proto",
          "trellis/core/v1/event.proto",
          "trellis/core/v1/message.proto",
        ]);
        expect(event[0]?.messageType.map((m) => m.name)).toContain("Event");
        // Files already sent on this stream are not sent again, except the one asked for.
        expect(files(1).map((f) => f.name)).toEqual(["trellis/core/v1/error.proto"]);
        expect(files(2).map((f) => f.name)).toEqual(["grpc/health/v1/health.proto"]);
        expect(files(3).map((f) => f.name)).toEqual(["grpc/health/v1/health.proto"]);
        expect(files(4).map((f) => f.name)).toEqual(["google/protobuf/timestamp.proto"]);
        for (const i of [5, 6]) {
          const answer = answers[i];
          expect(answer?.case).toBe("errorResponse");
          if (answer?.case === "errorResponse") expect(answer.value.errorCode).toBe(Code.NotFound);
        }
        const list = answers[7];
        expect(list?.case).toBe("listServicesResponse");
        if (list?.case === "listServicesResponse") {
          expect(list.value.service.map((s) => s.name)).toEqual(builtinServices);
        }
      });
    }
  });
});
