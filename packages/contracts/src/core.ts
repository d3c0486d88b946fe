// trellis.core.v1: the shared contracts every service reuses.
export * from "./gen/trellis/core/v1/error_pb.js";
export * from "./gen/trellis/core/v1/event_pb.js";
export * from "./gen/trellis/core/v1/message_pb.js";
