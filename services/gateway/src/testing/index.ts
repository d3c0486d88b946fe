/**
 * `@trellis/gateway/testing`: what tests (the gateway's and the
 * repository's) use to talk to a running gateway — a Harn REST client with
 * SSE, and a local OAuth identity provider. Never imported by shipped code.
 */
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
