// A resume's payload survives the resume_payload column whatever it is:
// none (null), an object, and rows written before the wrapper existed.
import { describe, expect, it } from "vitest";
import { resumePayloadOf, resumeText } from "../../src/store/codec.js";

const roundTrip = (payload: Parameters<typeof resumeText>[0]) =>
  resumePayloadOf(JSON.parse(resumeText(payload)));

describe("resume_payload", () => {
  it("marks a resume without a payload as a resume", () => {
    expect(roundTrip(undefined)).toEqual({ payload: null });
    expect(roundTrip(null)).toEqual({ payload: null });
  });

  it("carries payloads of every shape, a $resume-free object unchanged", () => {
    expect(roundTrip({ approved: true })).toEqual({ payload: { approved: true } });
    expect(roundTrip([1, "two"])).toEqual({ payload: [1, "two"] });
    expect(roundTrip("yes")).toEqual({ payload: "yes" });
    expect(roundTrip({ payload: 1 })).toEqual({ payload: { payload: 1 } });
  });

  it("reads a task that is not resuming as none", () => {
    expect(resumePayloadOf(null)).toBeUndefined();
  });

  it("reads rows of older versions (the payload stored bare) as they were", () => {
    expect(resumePayloadOf({ approved: true })).toEqual({ payload: { approved: true } });
    expect(resumePayloadOf("ok")).toEqual({ payload: "ok" });
  });
});
