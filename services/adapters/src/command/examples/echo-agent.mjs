#!/usr/bin/env node
// A tiny "bring your own harness" program for the command adapter: it reads
// one ExecutionRequest (proto3 JSON) from stdin and writes ExecutionEvents
// (proto3 JSON, one per line) to stdout, the last one `turnFinished`.
// Only the Node standard library; any language can do the same.
//
// What it does depends on the input text (used by the tests):
//   "sleep <ms>"   waits, then answers (stops at once on SIGTERM)
//   "ask"          suspends with an opaque checkpoint; resumed, it echoes the payload
//   "tool"         reports one internal tool call, then answers
//   "fail"         ends with a failed result
//   "crash"        exits without a result
//   "garbage"      writes a line that is not an event
//   anything else  streams "echo: <text>" and completes
import { createInterface } from "node:readline";

const emit = (event) => process.stdout.write(`${JSON.stringify(event)}\n`);
const assistant = (text) => ({ role: "ROLE_ASSISTANT", parts: [{ text: { text } }] });
const finish = (result) => {
  emit({ turnFinished: { result } });
  process.exit(0);
};

process.on("SIGTERM", () => process.exit(143));

const lines = createInterface({ input: process.stdin });
lines.once("line", async (line) => {
  const request = JSON.parse(line);
  const text = (request.input?.parts ?? [])
    .map((part) => part.text?.text ?? "")
    .join("")
    .trim();

  if (request.resume) {
    const said = JSON.stringify(request.resume.payload ?? null);
    finish({ completed: {}, messages: [assistant(`resumed with ${said}`)] });
  }
  if (text.startsWith("sleep ")) {
    await new Promise((resolve) => setTimeout(resolve, Number(text.slice(6))));
    finish({ completed: {}, messages: [assistant("awake")] });
  }
  switch (text) {
    case "ask":
      finish({
        suspended: {
          signalLabel: "more",
          kind: "SUSPENSION_KIND_INPUT",
          reason: "SUSPENSION_REASON_CLARIFICATION",
          checkpoint: { asked: text },
          metadata: { question: "what else?" },
        },
        messages: [assistant("What else should I know?")],
      });
      break;
    case "tool":
      emit({ toolStarted: { toolCallId: "t1", name: "clock", input: {} } });
      emit({ toolFinished: { toolCallId: "t1", name: "clock", outcome: "TOOL_OUTCOME_OK" } });
      emit({ stepFinished: { iteration: 1 } });
      finish({ completed: {}, messages: [assistant("it is noon")] });
      break;
    case "fail":
      finish({
        failed: { category: "provider_unavailable", message: "upstream down", retryable: true },
      });
      break;
    case "crash":
      process.stderr.write("boom\n");
      process.exit(3);
      break;
    case "garbage":
      process.stdout.write("this is not json\n");
      await new Promise((resolve) => setTimeout(resolve, 5000));
      break;
    default: {
      const answer = `echo: ${text}`;
      for (let i = 0; i < answer.length; i += 4)
        emit({ textDelta: { text: answer.slice(i, i + 4) } });
      emit({ stepFinished: { iteration: 1 } });
      finish({ completed: {} });
    }
  }
});
