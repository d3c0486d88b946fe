/**
 * `@trellis/runtime/testing`: test helpers other packages' tests share.
 * Never imported by shipped code.
 */
export {
  envelope,
  Http2Wire,
  type RawRequest,
  type RawResponse,
  type RpcOutcome,
  rpcOutcome,
  sendHttp1,
} from "./wire.js";
