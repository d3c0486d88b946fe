// trellis.tasks.v1: workspaces, agents, sessions, tasks, events, signals, artifacts, outcomes,
// branches, connectors, memory and skills.

export * from "./gen/trellis/tasks/v1/branches_pb.js";
export * from "./gen/trellis/tasks/v1/connectors_pb.js";
export * from "./gen/trellis/tasks/v1/journal_pb.js";
export * from "./gen/trellis/tasks/v1/memory_pb.js";
export * from "./gen/trellis/tasks/v1/resources_pb.js";
export * from "./gen/trellis/tasks/v1/services_pb.js";
export * from "./gen/trellis/tasks/v1/skills_pb.js";
export * from "./gen/trellis/tasks/v1/workspace_updates_pb.js";
