// The gateway forwards a bidi-streaming method (WorkerService.WorkerChannel)
// both ways as the messages come: a worker behind the gateway of a mesh gets
// the channel, not only the unary calls.
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import type { DescService } from "@bufbuild/protobuf";
import { type Client, createClient, createRouterTransport } from "@connectrpc/connect";
import { connectNodeAdapter, createGrpcTransport } from "@connectrpc/connect-node";
import {
  RoutingService,
  type WorkerChannelRequest,
  WorkerService,
} from "@trellis/contracts/adapters";
import { afterAll, describe, expect, it } from "vitest";
import { createForwardingImpl, registerForwarders } from "../src/grpc/forwarders.js";

async function listen(server: http2.Http2Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe("gateway forwarders: bidi streams", () => {
  const servers: http2.Http2Server[] = [];
  afterAll(() => {
    for (const server of servers) server.close();
  });

  it("forwards WorkerChannel both ways, message by message", async () => {
    // The owning service: answers each heartbeat call with a beat, as it comes.
    const owner = http2.createServer(
      connectNodeAdapter({
        routes: (r) => {
          r.service(WorkerService, {
            async *workerChannel(requests: AsyncIterable<WorkerChannelRequest>) {
              for await (const call of requests) {
                if (call.body.case === "heartbeat") {
                  yield {
                    callId: call.callId,
                    body: { case: "beat" as const, value: { ttlMs: call.body.value.inFlight } },
                  };
                }
              }
            },
          });
        },
      }),
    );
    servers.push(owner);
    const ownerUrl = await listen(owner);
    const gateway = http2.createServer(
      connectNodeAdapter({
        routes: (r) => {
          r.service(
            WorkerService,
            createForwardingImpl(
              WorkerService,
              createClient(WorkerService, createGrpcTransport({ baseUrl: ownerUrl })),
            ),
          );
        },
      }),
    );
    servers.push(gateway);
    const client = createClient(
      WorkerService,
      createGrpcTransport({ baseUrl: await listen(gateway) }),
    );
    // The next call is sent only once the previous answer came back: the
    // forwarder must not wait for the end of the request stream.
    let answered: (() => void) | undefined;
    const requests = (async function* () {
      for (let i = 1; i <= 3; i++) {
        yield {
          callId: BigInt(i),
          body: { case: "heartbeat" as const, value: { workerId: "w", session: "s", inFlight: i } },
        };
        await new Promise<void>((resolve) => {
          answered = resolve;
        });
      }
    })();
    const seen: [bigint, number][] = [];
    for await (const answer of client.workerChannel(requests)) {
      if (answer.body.case === "beat") seen.push([answer.callId, answer.body.value.ttlMs]);
      answered?.();
    }
    expect(seen).toEqual([
      [1n, 1],
      [2n, 2],
      [3n, 3],
    ]);
  });

  it("forwards a service to the owner it is given, others to their proto package's", () => {
    // Distributed: the tasks service holds the WorkerChannel streams (its
    // routers place on them in process); routing stays the adapters service's.
    const asked: [string, string | undefined][] = [];
    const transport = createRouterTransport(() => {});
    const clients = {
      get<T extends DescService>(service: T, owner?: string): Client<T> {
        asked.push([service.typeName, owner]);
        return createClient(service, transport);
      },
    };
    registerForwarders(
      { service: () => undefined } as never,
      [WorkerService, RoutingService],
      clients,
      { owners: { [WorkerService.typeName]: "tasks" } },
    );
    expect(asked).toEqual([
      [WorkerService.typeName, "tasks"],
      [RoutingService.typeName, undefined],
    ]);
  });
});
