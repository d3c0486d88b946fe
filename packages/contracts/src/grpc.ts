// Standard gRPC services every Trellis service also serves.
export * as health from "./gen/grpc/health/v1/health_pb.js";
export * as reflectionV1 from "./gen/grpc/reflection/v1/reflection_pb.js";
export * as reflectionV1alpha from "./gen/grpc/reflection/v1alpha/reflection_pb.js";
