import { fromBinary, toBinary } from "@bufbuild/protobuf";
import { getTextEncoding } from "@bufbuild/protobuf/wire";
import { StructSchema } from "@bufbuild/protobuf/wkt";
import { describe, expect, it } from "vitest";
import { useBufferUtf8Encoder } from "../src/protobuf-text.js";

describe("protobuf's UTF-8 encoder on Buffer", () => {
  const texts = [
    "",
    "ok",
    "tsk_0123456789abcdef",
    "é ünïcode ✓ 😀",
    "\u0000",
    "\ud800",
    "a\udc00b",
    "x\ud83d",
  ];

  it("writes the same bytes as TextEncoder, lone surrogates included", () => {
    const reference = new TextEncoder();
    useBufferUtf8Encoder();
    useBufferUtf8Encoder();
    const { encodeUtf8 } = getTextEncoding();
    for (const text of texts) {
      expect(Buffer.from(encodeUtf8(text)).toString("hex")).toBe(
        Buffer.from(reference.encode(text)).toString("hex"),
      );
    }
  });

  it("messages encoded with it parse back whole (no pool slice shared)", () => {
    useBufferUtf8Encoder();
    const message = {
      $typeName: "google.protobuf.Struct" as const,
      fields: Object.fromEntries(
        texts.map((t, i) => [
          `k${i}`,
          {
            $typeName: "google.protobuf.Value" as const,
            kind: { case: "stringValue" as const, value: t },
          },
        ]),
      ),
    };
    const first = toBinary(StructSchema, message);
    const copy = new Uint8Array(first);
    toBinary(StructSchema, message);
    expect(first).toEqual(copy);
    const parsed = fromBinary(StructSchema, first);
    expect(Object.keys(parsed.fields)).toHaveLength(texts.length);
  });
});
