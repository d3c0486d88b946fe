/**
 * The request and response types of the server, in a module of their own so
 * that the server and the modules it is built from (`rpc-adapter`,
 * `request-body`) can share them without importing each other.
 */
import type * as http from "node:http";
import type * as http2 from "node:http2";

/** An incoming request on either HTTP version. */
export type HttpRequest = http.IncomingMessage | http2.Http2ServerRequest;
/** The response of an {@link HttpRequest}. */
export type HttpResponse = http.ServerResponse | http2.Http2ServerResponse;
