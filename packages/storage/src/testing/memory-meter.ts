/**
 * A meter whose counters a test reads back: an in-memory exporter
 * (cumulative) behind a reader that exports only when the test flushes it.
 * The contract suites hand `meter` to the code under test and ask `total`
 * what a counter reached.
 */
import type { Meter } from "@opentelemetry/api";
import {
  AggregationTemporality,
  type DataPoint,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from "@opentelemetry/sdk-metrics";

/** What {@link memoryMeter} returns. */
export interface MemoryMeter {
  readonly meter: Meter;
  /** Flushes, then the data points of the instrument `name` in the latest export (none when absent). */
  points(name: string): Promise<DataPoint<unknown>[]>;
  /**
   * Flushes, then sums the points of the counter `name` whose attributes
   * include `attributes` (0 when absent).
   */
  total(name: string, attributes?: Record<string, string>): Promise<number>;
  shutdown(): Promise<void>;
}

/** A fresh meter provider exporting into memory; shut it down at the end of the test. */
export function memoryMeter(): MemoryMeter {
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 60_000 });
  const provider = new MeterProvider({ readers: [reader] });
  async function points(name: string): Promise<DataPoint<unknown>[]> {
    await provider.forceFlush();
    const metric = exporter
      .getMetrics()
      .at(-1)
      ?.scopeMetrics.flatMap((scope) => scope.metrics)
      .find((m) => m.descriptor.name === name);
    return (metric?.dataPoints ?? []) as DataPoint<unknown>[];
  }
  return {
    meter: provider.getMeter("test"),
    points,
    async total(name, attributes = {}) {
      return (await points(name))
        .filter((p) => Object.entries(attributes).every(([k, v]) => p.attributes[k] === v))
        .reduce((n, p) => n + Number(p.value), 0);
    },
    shutdown: () => provider.shutdown(),
  };
}
