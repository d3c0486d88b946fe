/**
 * Protobuf's UTF-8 encoder on Node's `Buffer.from`. protobuf-es encodes every
 * string field with `TextEncoder.encode`, which allocates a new ArrayBuffer
 * per string; `Buffer.from` slices Node's pool and measured ~3× less CPU for
 * the short strings (ids, kinds, names) messages carry. `TextEncoder.encode`
 * was 1.4–2.4 % of an embedded turn's busy samples (docs/benchmarks.md,
 * session 14). The bytes are the same, invalid UTF-16 (a lone surrogate)
 * included: both write U+FFFD. Decoding stays protobuf-es's own. The writer
 * copies each string's bytes into the message it returns, so nothing keeps a
 * pool slice.
 */
import { configureTextEncoding, getTextEncoding } from "@bufbuild/protobuf/wire";

// Buffer.from never returns a view of a SharedArrayBuffer.
const encodeUtf8 = (text: string) => Buffer.from(text, "utf8") as Uint8Array<ArrayBuffer>;

/**
 * Makes protobuf-es encode strings with `Buffer.from` in this process (once;
 * `createService` calls it). Idempotent.
 */
export function useBufferUtf8Encoder(): void {
  const current = getTextEncoding();
  if (current.encodeUtf8 === encodeUtf8) return;
  configureTextEncoding({ ...current, encodeUtf8 });
}
