// The CLI checks service names against a list that loads nothing
// (src/service-names.ts); it must name exactly what Trellis runs.
import { ADAPTER_WORKER } from "@trellis/adapters";
import { describe, expect, it } from "vitest";
import { servableServices as servable } from "../src/cli/serve.js";
import { adapterWorkerName, servableServices, serviceNames } from "../src/service-names.js";
import { allServices } from "../src/services.js";

describe("service names", () => {
  it("are allServices' names, in start order", () => {
    expect(serviceNames).toEqual(allServices.map((s) => s.name));
  });

  it("name the adapter worker as the adapters service does", () => {
    expect(adapterWorkerName).toBe(ADAPTER_WORKER);
  });

  it("are what trellis serve accepts: the services, then the worker", () => {
    expect(servableServices).toEqual([...allServices.map((s) => s.name), ADAPTER_WORKER]);
    expect(servable).toBe(servableServices);
  });
});
