// GET /v1/health: public, minimal, and truthful about what answers — an
// embedded process says so and lists its in-process backends; a gateway in
// front of services that do not answer says which, without addresses.
import { adaptersService } from "@trellis/adapters";
import { type EmbeddedTrellis, startEmbedded } from "@trellis/platform";
import { createLogger } from "@trellis/runtime";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { gatewayService } from "../src/index.js";
import { MeshHealthProbe } from "../src/topology/mesh-health.js";

describe("GET /v1/health", () => {
  let trellis: EmbeddedTrellis;
  beforeAll(async () => {
    trellis = await startEmbedded({
      services: [gatewayService, adaptersService],
      port: 0,
      env: { TRELLIS_API_KEY: "trellis-mesh-health-test-key-0123456789" },
      logger: createLogger({ service: "mesh-health-test", level: "error", write: () => {} }),
    });
  });
  afterAll(() => trellis?.close({ graceMs: 100 }));

  it("answers without credentials or protocol version: embedded, with its workers", async () => {
    const response = await fetch(`${trellis.address.url}/v1/health`);
    expect(response.status).toBe(200);
    const body = (await response.json()) as {
      object: string;
      mode: string;
      status: string;
      services: { name: string; status: string }[];
      workers: { backend_id: string; in_process: boolean; status: string }[];
    };
    expect(body).toMatchObject({ object: "health", mode: "embedded", status: "SERVING" });
    expect(body.services).toEqual([
      expect.objectContaining({ name: "trellis (embedded)", status: "SERVING" }),
    ]);
    expect(body.workers.length).toBeGreaterThan(0);
    expect(body.workers.every((w) => w.in_process && w.status === "SERVING")).toBe(true);
    expect(JSON.stringify(body)).not.toContain("127.0.0.1");
  });
});

describe("MeshHealthProbe in a mesh", () => {
  it("names each upstream that does not answer, and the registry's silence", async () => {
    const probe = new MeshHealthProbe({
      mode: "distributed",
      // Nothing listens on port 9: every upstream is unreachable.
      env: {
        TRELLIS_CHAT_URL: "http://127.0.0.1:9",
        TRELLIS_TASKS_URL: "http://127.0.0.1:9",
        TRELLIS_RECEIPTS_URL: "http://127.0.0.1:9",
        TRELLIS_ADAPTERS_URL: "http://127.0.0.1:9",
      },
      clients: {
        get: () =>
          ({
            listBackends: async () => {
              throw new Error("connection refused");
            },
          }) as never,
      },
    });
    const view = await probe.check();
    expect(view.mode).toBe("distributed");
    expect(view.status).toBe("NOT_SERVING");
    expect(view.services.map((s) => [s.name, s.status])).toEqual([
      ["gateway", "SERVING"],
      ["chat", "UNREACHABLE"],
      ["tasks", "UNREACHABLE"],
      ["receipts", "UNREACHABLE"],
      ["adapters", "UNREACHABLE"],
    ]);
    expect(view.workers).toEqual([]);
    expect(view.workers_reason).toContain("connection refused");
    // Reused for a second: a public endpoint must not fan out per request.
    expect(await probe.check()).toBe(view);
  });
});
