// trellis.receipts.v1: signed, hash-chained receipts and their verification.
export * from "./gen/trellis/receipts/v1/receipts_pb.js";
