/**
 * A meter whose counters a test reads back: an in-memory exporter
 * (cumulative) behind a reader that exports only when the test flushes it.
 * The contract suites hand `meter` to the code under test and ask `total`
 * what a counter reached.
 */
import type { Meter } from "@opentelemetry/api";
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
  type SumMetricData,
} from "@opentelemetry/sdk-metrics";

/** What {@link memoryMeter} returns. */
export interface MemoryMeter {
  readonly meter: Meter;
  /** Flushes, then sums the data points of the counter `name` in the latest export (0 when absent). */
  total(name: string): Promise<number>;
  shutdown(): Promise<void>;
}

/** A fresh meter provider exporting into memory; shut it down at the end of the test. */
export function memoryMeter(): MemoryMeter {
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 60_000 });
  const provider = new MeterProvider({ readers: [reader] });
  return {
    meter: provider.getMeter("test"),
    async total(name) {
      await provider.forceFlush();
      const metric = exporter
        .getMetrics()
        .at(-1)
        ?.scopeMetrics[0]?.metrics.find((m) => m.descriptor.name === name) as
        | SumMetricData
        | undefined;
      return (metric?.dataPoints ?? []).reduce((n, p) => n + Number(p.value), 0);
    },
    shutdown: () => provider.shutdown(),
  };
}
