// trellis.tasks.v1: workspaces, agents, sessions, tasks, events, signals, artifacts, outcomes.
export * from "./gen/trellis/tasks/v1/resources_pb.js";
export * from "./gen/trellis/tasks/v1/services_pb.js";
export * from "./gen/trellis/tasks/v1/workspace_updates_pb.js";
