/** Worker announcements between their proto form (`WorkerRegistration`) and the registry's. */
import { create } from "@bufbuild/protobuf";
import { capabilitiesFromProto, capabilitiesToProto, contractInvalid } from "@trellis/adapter-sdk";
import { type WorkerRegistration, WorkerRegistrationSchema } from "@trellis/contracts/adapters";
import type { WorkerAnnouncement } from "./registry.js";

/** Proto → announcement; a bad field is an `execution_contract_invalid` error naming it. */
export function announcementFromProto(
  value: WorkerRegistration | undefined,
  field = "worker",
): WorkerAnnouncement {
  if (!value) throw contractInvalid(field, "is required");
  return {
    workerId: value.workerId,
    backendId: value.backendId,
    capabilities: capabilitiesFromProto(value.capabilities, `${field}.capabilities`),
    capacity: value.capacity,
    inFlight: value.inFlight,
    hints: {
      costPerExecution: value.hints?.costPerExecution ?? 0,
      latencyMs: value.hints?.latencyMs ?? 0,
    },
    heartbeatMs: value.heartbeatIntervalMs,
    leaving: value.leaving,
    ...(value.directOffers ? { direct: true } : {}),
  };
}

/** Announcement → proto. */
export function announcementToProto(value: WorkerAnnouncement): WorkerRegistration {
  return create(WorkerRegistrationSchema, {
    schemaVersion: value.capabilities.schemaVersion,
    workerId: value.workerId,
    backendId: value.backendId,
    capabilities: capabilitiesToProto(value.capabilities),
    capacity: value.capacity,
    inFlight: value.inFlight,
    hints: value.hints,
    heartbeatIntervalMs: value.heartbeatMs,
    leaving: value.leaving,
    directOffers: value.direct === true,
  });
}
