// The RPC field caps (runtime `request-checks.ts`) are for callers outside
// the mesh (issue 22): a call with a verified service credential — chat
// handing tasks a history of more than TRELLIS_MAX_RPC_LIST_LENGTH messages —
// is not refused for its size, while the same request at a public service
// (the edge) is, and a NUL is refused on both sides. The same for the
// structure scan of binary requests (keys per Struct): a signed request's
// bytes skip it (`trustedRequest`, as distributed services are built).
import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { TaskService } from "@trellis/contracts/tasks";
import { createService, errorDetailOf, type TrellisService } from "@trellis/runtime";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createMeshClientInterceptor,
  createMeshServerInterceptor,
  MeshCredentials,
  meshSignedRpc,
} from "../src/index.js";

const mesh = new MeshCredentials("0123456789abcdef0123456789abcdef-caps-test");
const env = {
  TRELLIS_MAX_RPC_ID_LENGTH: "64",
  TRELLIS_MAX_RPC_STRING_LENGTH: "65536",
  TRELLIS_MAX_RPC_LIST_LENGTH: "100",
  TRELLIS_MAX_JSON_KEYS: "16",
};

/** A metadata Struct of `count` keys (the cap is 16). */
function keys(count: number) {
  return Object.fromEntries(Array.from({ length: count }, (_, i) => [`k${i}`, i]));
}

/** A SubmitTask input of `count` text parts (the cap is 100). */
function parts(count: number, text = "x") {
  return {
    parts: Array.from({ length: count }, () => ({
      kind: { case: "text" as const, value: { text } },
    })),
  };
}

describe("field caps apply at the edge, not to mesh-credentialed calls", () => {
  const served: number[] = [];
  let internal: TrellisService;
  let edge: TrellisService;
  let internalUrl = "";
  let edgeUrl = "";

  function start(interceptors: Interceptor[], trusted: boolean): TrellisService {
    return createService({
      name: "svc",
      env,
      interceptors,
      ...(trusted ? { trustedRequest: (req) => meshSignedRpc(mesh, req) } : {}),
      routes: (router) => {
        router.service(TaskService, {
          async submitTask(request) {
            served.push(request.input?.parts.length ?? 0);
            return {};
          },
        });
      },
    });
  }

  beforeAll(async () => {
    internal = start([createMeshServerInterceptor(mesh)], true);
    edge = start([], false);
    ({ url: internalUrl } = await internal.listen({ host: "127.0.0.1", port: 0 }));
    ({ url: edgeUrl } = await edge.listen({ host: "127.0.0.1", port: 0 }));
  }, 60_000);
  afterAll(async () => {
    await internal?.close({ graceMs: 500 });
    await edge?.close({ graceMs: 500 });
  });

  /** A client of the internal service that signs its calls with `credentials`. */
  const signedWith = (credentials: MeshCredentials) =>
    createClient(
      TaskService,
      createGrpcTransport({
        baseUrl: internalUrl,
        interceptors: [createMeshClientInterceptor(credentials, "chat")],
      }),
    );
  const signed = () => signedWith(mesh);
  /** Signed with a credential the mesh does not share. */
  const forgedClient = () =>
    signedWith(new MeshCredentials("fedcba9876543210fedcba9876543210-other"));

  async function failure(call: Promise<unknown>) {
    return call.then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
  }

  it("serves a mesh-credentialed request past the list, string and id caps", async () => {
    const before = served.length;
    await signed().submitTask({ sessionId: "s".repeat(65), input: parts(1_000) });
    await signed().submitTask({ input: parts(1, "x".repeat(70_000)) });
    expect(served.slice(before)).toEqual([1_000, 1]);
  });

  it("leaves a signed binary request out of the structure scan, not the edge's", async () => {
    const before = served.length;
    await signed().submitTask({ metadata: keys(40), input: parts(2) });
    expect(served.slice(before)).toEqual([2]);
    const client = createClient(TaskService, createGrpcTransport({ baseUrl: edgeUrl }));
    const error = await failure(client.submitTask({ metadata: keys(40), input: parts(3) }));
    expect(error?.code).toBe(Code.InvalidArgument);
    expect(error && errorDetailOf(error)?.param).toBe("metadata");
    // A forged credential is scanned (and then refused by the interceptor).
    const forged = forgedClient();
    const scanned = await failure(forged.submitTask({ metadata: keys(40), input: parts(4) }));
    expect(scanned?.code).toBe(Code.InvalidArgument);
    expect(served.slice(before)).toEqual([2]);
  });

  it("still refuses a NUL from inside the mesh", async () => {
    const error = await failure(signed().submitTask({ input: parts(1, "a\u0000b") }));
    expect(error?.code).toBe(Code.InvalidArgument);
    expect(error && errorDetailOf(error)?.param).toBe("input.parts[0].text.text");
  });

  it("refuses the same request at the edge, naming the field and the cap", async () => {
    const before = served.length;
    const client = createClient(TaskService, createGrpcTransport({ baseUrl: edgeUrl }));
    const error = await failure(client.submitTask({ input: parts(1_000) }));
    expect(error?.code).toBe(Code.InvalidArgument);
    const detail = error ? errorDetailOf(error) : undefined;
    expect(detail?.param).toBe("input.parts");
    expect(detail?.metadata.limit_list_length).toBe("100");
    await client.submitTask({ input: parts(100) });
    expect(served.slice(before)).toEqual([100]);
  });

  it("gives no exemption to a forged or missing credential", async () => {
    const forged = forgedClient();
    const before = served.length;
    expect((await failure(forged.submitTask({ input: parts(1_000) })))?.code).toBe(
      Code.Unauthenticated,
    );
    const bare = createClient(TaskService, createGrpcTransport({ baseUrl: internalUrl }));
    expect((await failure(bare.submitTask({ input: parts(1_000) })))?.code).toBe(
      Code.Unauthenticated,
    );
    expect(served.length).toBe(before);
  });
});
