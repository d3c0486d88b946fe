// trellis.adapters.v1: the execution seam, the adapter registry and routing, the worker wire messages, vaults.
export * from "./gen/trellis/adapters/v1/execution_pb.js";
export * from "./gen/trellis/adapters/v1/routing_pb.js";
export * from "./gen/trellis/adapters/v1/vaults_pb.js";
export * from "./gen/trellis/adapters/v1/worker_pb.js";
export * from "./gen/trellis/adapters/v1/worker_service_pb.js";
