/**
 * `@trellis/gateway/testing`: what tests (the gateway's and the
 * repository's) use to talk to a running gateway — a Harn REST client with
 * SSE, a local OAuth identity provider, and scripted agent graphs to
 * register; the gateway's public surface (gRPC services and REST routes),
 * for the fuzz suite; and the gRPC
 * forwarder, for a benchmark that measures the forwarding hop without a
 * gateway around it. Never imported by shipped code.
 */
export { createForwardingImpl } from "../grpc/forwarders.js";
export { publicServices } from "../grpc/public-services.js";
export { restRoutes } from "../http/routes/index.js";
export {
  type ApiResponse,
  harnClient,
  harnHeaders,
  type Json,
  poll,
  type RequestOptions,
  SseReader,
  VERSION,
} from "./harn-client.js";
export { requestToken, TestIdentityProvider, type TokenResponse } from "./oauth.js";
export { replyGraph, waitGraph } from "./scripted-graphs.js";
