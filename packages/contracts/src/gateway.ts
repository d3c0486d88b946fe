// trellis.gateway.v1: services the gateway itself serves (the UI event stream, quota reads).

export * from "./gen/trellis/gateway/v1/quotas_pb.js";
export * from "./gen/trellis/gateway/v1/ui_pb.js";
