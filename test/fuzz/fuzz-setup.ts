/**
 * What a fuzz run is given (the resource pool, the routes and RPCs to aim
 * at) and the case the generator makes from it.
 */
import type { DescMethod } from "@bufbuild/protobuf";
import type { RawRequest } from "@trellis/runtime/testing";

/**
 * A vault id the pool's workspace holds: another workspace creating one of
 * the same id must not be told it exists (ids are unique per workspace).
 */
export const TAKEN_VAULT_ID = "vlt_fuzz_taken";

/** The same for a client-chosen session id (issue 22 finding 4). */
export const TAKEN_SESSION_ID = "ses_fuzz_taken";

/** Ids of real resources, so that some requests reach deep into handlers. */
export interface Pool {
  workspaceId: string;
  agentId: string;
  sessionId: string;
  taskId: string;
  artifactId: string;
  messageId: string;
  eventId: string;
}

/** A REST route as the fuzzer sees it (the gateway's route table). */
export interface RestRouteInfo {
  method: string;
  path: string;
}

/** An RPC method and where it can be called. */
export interface RpcTarget {
  method: DescMethod;
  /** Base URLs serving it: the gateway and/or the owning service. */
  viaGateway: boolean;
  directUrl: string | undefined;
}

/** Where the generated requests go and with what credentials. */
export interface FuzzSetup {
  gatewayUrl: string;
  apiKey: string;
  protocolVersion: string;
  pool: Pool;
  restRoutes: readonly RestRouteInfo[];
  rpcTargets: readonly RpcTarget[];
  /** The mesh's body limit (oversize cases go just past it). */
  maxBodyBytes: number;
}

export type Surface = "rest" | "rpc" | "raw";
export type WireProtocol =
  | "rest"
  | "connect-json"
  | "connect-proto"
  | "connect-get"
  | "connect-stream-json"
  | "connect-stream-proto"
  | "grpc"
  | "grpc-json"
  | "grpc-web"
  | "raw-http";

/** One generated request. */
export interface FuzzCase {
  index: number;
  surface: Surface;
  protocol: WireProtocol;
  transport: "h1" | "h2" | "socket";
  baseUrl: string;
  request: RawRequest;
  /** Raw bytes for `socket` cases (sent as they are). */
  raw?: string;
  /** What was done to the request, for the report. */
  mutations: string[];
  /** The request set a deadline: DeadlineExceeded is the client's own doing. */
  deadlineSet: boolean;
  /** The path was made up: Unimplemented / 404 is the right answer. */
  unknownPath: boolean;
  /** The RPC (for the report). */
  target: string;
  /**
   * Why this request must not succeed (a hostile shape sent intact, e.g. a
   * webhook to an IPv6 spelling of loopback): a 2xx is a failure.
   */
  mustRefuse?: string;
  /** Statuses that would leak something here (e.g. 409 for another workspace's id). */
  leakStatuses?: readonly number[];
}
