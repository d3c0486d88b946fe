/**
 * A minimal OTLP/HTTP receiver for tests: a node:http server that accepts
 * `POST /v1/traces` and `POST /v1/metrics` in protobuf (what the services'
 * exporters send), decodes the parts of the OTLP messages the tests read, and
 * keeps them. Decoding is done from the wire format with the field numbers of
 * opentelemetry-proto (trace/v1, metrics/v1, common/v1, resource/v1).
 */
import { once } from "node:events";
import { createServer, type IncomingMessage, type Server } from "node:http";
import { gunzipSync } from "node:zlib";
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";

/** OTLP SpanKind numbers (`ReceivedSpan.kind`). */
export const SpanKind = { INTERNAL: 1, SERVER: 2, CLIENT: 3, PRODUCER: 4, CONSUMER: 5 } as const;

/** A received span. Ids are lower-case hex; a root span has `parentSpanId` "". */
export interface ReceivedSpan {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  /** OTLP SpanKind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  startNs: bigint;
  endNs: bigint;
  attributes: Record<string, string | number | boolean>;
  /** OTLP status code: 0 unset, 1 ok, 2 error. */
  statusCode: number;
}

/** One data point of a received histogram (cumulative or delta, as sent). */
export interface ReceivedHistogramPoint {
  service: string;
  metric: string;
  unit: string;
  attributes: Record<string, string | number | boolean>;
  count: number;
  sum: number;
  bucketCounts: number[];
  bounds: number[];
  /** 1 delta, 2 cumulative. */
  temporality: number;
  timeNs: bigint;
}

type Decoded = Record<number, unknown[]>;

// Read every field of a message: length-delimited ones as raw bytes, varints
// as bigint, fixed64 as 8 raw bytes, fixed32 as 4 raw bytes.
function fields(bytes: Uint8Array): Decoded {
  const reader = new BinaryReader(bytes);
  const out: Decoded = {};
  while (reader.pos < reader.len) {
    const [no, type] = reader.tag();
    let value: unknown;
    switch (type) {
      case WireType.Varint:
        value = BigInt(reader.uint64());
        break;
      case WireType.Bit64:
      case WireType.Bit32:
        // skip() returns the bytes it skipped: the 8 (4) raw bytes of the value.
        value = reader.skip(type, no).slice();
        break;
      case WireType.LengthDelimited:
        value = reader.bytes();
        break;
      default:
        reader.skip(type, no);
        continue;
    }
    const list = out[no] ?? [];
    list.push(value);
    out[no] = list;
  }
  return out;
}

const text = new TextDecoder();
const hex = (b: unknown): string => (b instanceof Uint8Array ? Buffer.from(b).toString("hex") : "");
const str = (b: unknown): string => (b instanceof Uint8Array ? text.decode(b) : "");
const msgs = (d: Decoded, no: number): Decoded[] =>
  (d[no] ?? []).map((b) => fields(b as Uint8Array));
const first = (d: Decoded, no: number): unknown => d[no]?.[0];
const fixed64 = (b: unknown): bigint =>
  b instanceof Uint8Array ? Buffer.from(b).readBigUInt64LE(0) : 0n;
const double = (b: unknown): number =>
  b instanceof Uint8Array ? Buffer.from(b).readDoubleLE(0) : 0;

// common.v1.AnyValue: 1 string, 2 bool, 3 int, 4 double.
function anyValue(d: Decoded): string | number | boolean {
  if (d[1]) return str(d[1][0]);
  if (d[2]) return d[2][0] === 1n;
  if (d[3]) return Number(BigInt.asIntN(64, d[3][0] as bigint));
  if (d[4]) return double(d[4][0]);
  return "";
}

// repeated common.v1.KeyValue (1 key, 2 value).
function attributes(list: Decoded[]): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const kv of list) {
    const value = first(kv, 2);
    out[str(first(kv, 1))] = value instanceof Uint8Array ? anyValue(fields(value)) : "";
  }
  return out;
}

// resource.v1.Resource: 1 attributes.
function serviceOf(resource: unknown): string {
  if (!(resource instanceof Uint8Array)) return "";
  return String(attributes(msgs(fields(resource), 1))["service.name"] ?? "");
}

/** Decode an ExportTraceServiceRequest (1 resource_spans). */
export function decodeTraces(body: Uint8Array): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  for (const rs of msgs(fields(body), 1)) {
    const service = serviceOf(first(rs, 1));
    for (const ss of msgs(rs, 2)) {
      // Span: 1 trace_id, 2 span_id, 4 parent_span_id, 5 name, 6 kind,
      // 7 start (fixed64), 8 end (fixed64), 9 attributes, 15 status.
      for (const s of msgs(ss, 2)) {
        const status = first(s, 15);
        spans.push({
          service,
          traceId: hex(first(s, 1)),
          spanId: hex(first(s, 2)),
          parentSpanId: hex(first(s, 4)),
          name: str(first(s, 5)),
          kind: Number(first(s, 6) ?? 0n),
          startNs: fixed64(first(s, 7)),
          endNs: fixed64(first(s, 8)),
          attributes: attributes(msgs(s, 9)),
          // Status: 3 code.
          statusCode: status instanceof Uint8Array ? Number(first(fields(status), 3) ?? 0n) : 0,
        });
      }
    }
  }
  return spans;
}

// Packed or unpacked repeated fixed64 / double.
function packed64(values: unknown[] | undefined): Buffer[] {
  const out: Buffer[] = [];
  for (const v of values ?? []) {
    const b = Buffer.from(v as Uint8Array);
    for (let i = 0; i + 8 <= b.length; i += 8) out.push(b.subarray(i, i + 8));
  }
  return out;
}

/** Decode the histograms of an ExportMetricsServiceRequest (1 resource_metrics). */
export function decodeHistograms(body: Uint8Array): ReceivedHistogramPoint[] {
  const points: ReceivedHistogramPoint[] = [];
  for (const rm of msgs(fields(body), 1)) {
    const service = serviceOf(first(rm, 1));
    for (const sm of msgs(rm, 2)) {
      // Metric: 1 name, 3 unit, 9 histogram.
      for (const m of msgs(sm, 2)) {
        const histogram = first(m, 9);
        if (!(histogram instanceof Uint8Array)) continue;
        const h = fields(histogram);
        const temporality = Number(first(h, 2) ?? 0n);
        // HistogramDataPoint: 3 time, 4 count (fixed64), 5 sum (double),
        // 6 bucket_counts (fixed64), 7 explicit_bounds (double), 9 attributes.
        for (const p of msgs(h, 1)) {
          points.push({
            service,
            metric: str(first(m, 1)),
            unit: str(first(m, 3)),
            attributes: attributes(msgs(p, 9)),
            count: Number(fixed64(first(p, 4))),
            sum: double(first(p, 5)),
            bucketCounts: packed64(p[6]).map((b) => Number(b.readBigUInt64LE(0))),
            bounds: packed64(p[7]).map((b) => b.readDoubleLE(0)),
            temporality,
            timeNs: fixed64(first(p, 3)),
          });
        }
      }
    }
  }
  return points;
}

/** A running receiver. */
export interface OtlpReceiver {
  /** Base URL, for `OTEL_EXPORTER_OTLP_ENDPOINT`. */
  url: string;
  spans: ReceivedSpan[];
  histograms: ReceivedHistogramPoint[];
  /** Requests that could not be decoded (should stay empty). */
  rejected: string[];
  close(): Promise<void>;
}

async function readBody(req: IncomingMessage): Promise<Uint8Array> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const raw = Buffer.concat(chunks);
  return req.headers["content-encoding"] === "gzip" ? gunzipSync(raw) : raw;
}

/** Start a receiver on a free loopback port. */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const histograms: ReceivedHistogramPoint[] = [];
  const rejected: string[] = [];
  const server: Server = createServer((req, res) => {
    void (async () => {
      try {
        const body = await readBody(req);
        if (req.headers["content-type"] !== "application/x-protobuf") {
          throw new Error(`unexpected content type ${req.headers["content-type"]}`);
        }
        if (req.method === "POST" && req.url === "/v1/traces") spans.push(...decodeTraces(body));
        else if (req.method === "POST" && req.url === "/v1/metrics")
          histograms.push(...decodeHistograms(body));
        else throw new Error(`unexpected ${req.method} ${req.url}`);
        // An empty Export*ServiceResponse: full success.
        res.writeHead(200, { "content-type": "application/x-protobuf" });
        res.end();
      } catch (error) {
        rejected.push(String(error));
        res.writeHead(400);
        res.end();
      }
    })();
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no address");
  return {
    url: `http://127.0.0.1:${address.port}`,
    spans,
    histograms,
    rejected,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
