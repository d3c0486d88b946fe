/**
 * `@trellis/tasks/testing`: what tests (the tasks service's and others')
 * use to drive a running tasks service — its clients, a text message, an
 * agent, a watch until a task settles, what a replayed message must
 * reproduce of its source — and the store's message codec, for tests that
 * rewrite a stored row as an older version wrote it. Never imported by
 * shipped code.
 */
export { decodeMessages, encodeMessages } from "../store/codec.js";
export { clientsOf, createAgent, type TasksClients, text, watchUntil } from "./clients.js";
export { comparable } from "./replayed-messages.js";
