/**
 * Calls between services hosted in one process. Embedded mode hosts every
 * service this way; a distributed process may host several
 * (`trellis serve tasks,chat`) and calls among those the same way.
 *
 * | a call between co-hosted services | how |
 * |---|---|
 * | reaches the same handlers, without a socket or a wire protocol | `createInProcessTransport` over the hosted modules' routes |
 * | has the server side a call between processes has | the server's span and RED metrics, the request id the caller forwarded (or a new one), the domain-error mapping |
 * | carries the caller the gateway authenticated, and nothing else | signed with the service credentials on the client side, checked on the server side, as between processes |
 */
import type { DescService } from "@bufbuild/protobuf";
import {
  type Client,
  type ConnectRouter,
  createClient,
  type Interceptor,
  type Transport,
} from "@connectrpc/connect";
import {
  acceptOrCreateRequestId,
  createClientTracingInterceptor,
  createErrorInterceptor,
  createServerMetricsInterceptor,
  createServerTracingInterceptor,
  type Logger,
  requestIdHeader,
  requestIdKey,
} from "@trellis/runtime";
import { createInProcessTransport } from "./in-process-transport.js";
import {
  createMeshClientInterceptor,
  createMeshServerInterceptor,
  type MeshCredentials,
} from "./mesh.js";

/** Options of {@link createCoHostedTransport}. */
export interface CoHostedTransportOptions {
  /** Registers the hosted services' handlers. */
  routes: (router: ConnectRouter) => void;
  mesh: MeshCredentials;
  /** Where the error mapping logs unexpected failures. */
  logger: Logger;
  /** The name calls are signed as coming from (the host). */
  peer: string;
}

/** The in-process transport between co-hosted services (see the table above). */
export function createCoHostedTransport(options: CoHostedTransportOptions): Transport {
  // The server side takes the request id the caller forwarded, as a server does.
  const inProcessRequestId: Interceptor = (next) => (req) => {
    if (req.contextValues.get(requestIdKey) === "") {
      req.contextValues.set(requestIdKey, acceptOrCreateRequestId(req.header.get(requestIdHeader)));
    }
    return next(req);
  };
  return createInProcessTransport({
    routes: options.routes,
    serverInterceptors: [
      // As a distributed service's server: its span (the call's server side
      // in the trace) and RED metrics, outside the error mapping.
      createServerTracingInterceptor(),
      createServerMetricsInterceptor(),
      inProcessRequestId,
      createErrorInterceptor(options.logger),
      createMeshServerInterceptor(options.mesh),
    ],
    clientInterceptors: [
      createClientTracingInterceptor(),
      createMeshClientInterceptor(options.mesh, options.peer),
    ],
  });
}

/**
 * Clients of co-hosted services, one per RPC service. The transport comes
 * once every hosted module is built (a module's factory is given the
 * clients before the routes they reach exist); a call before then is a
 * programming error.
 */
export class CoHostedClients {
  #transport: Transport | undefined;
  readonly #cache = new Map<string, Client<DescService>>();

  /** Connects the clients to the hosted services' transport. */
  connect(transport: Transport): void {
    this.#transport = transport;
  }

  get<T extends DescService>(service: T): Client<T> {
    if (!this.#transport)
      throw new Error("co-hosted clients are available once every hosted service is built");
    let client = this.#cache.get(service.typeName);
    if (!client) {
      client = createClient(service, this.#transport) as Client<DescService>;
      this.#cache.set(service.typeName, client);
    }
    return client as Client<T>;
  }

  close(): void {
    this.#cache.clear();
  }
}
