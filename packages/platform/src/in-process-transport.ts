/**
 * The transport embedded services call each other through: the handlers of
 * the same process, invoked directly.
 *
 * Why not Connect's `createRouterTransport`: it runs the whole Connect wire
 * protocol in memory (URL parsing, envelopes, byte streams through several
 * async-iterable stages), which measured ~560 µs of CPU for one trivial
 * unary call on the CI machine — more than a real HTTP/2 round trip to a
 * bare Connect server. A chat turn makes two such calls.
 *
 * What stays exactly as on the wire, so a handler cannot tell the difference:
 *
 * - messages cross as deep copies (`clone`) in both directions: caller and
 *   handler never share an object (nested messages, lists, maps and bytes
 *   included), and every field is set through protobuf's reflection, which
 *   refuses a value of the wrong type as the encoder would. (Encoding to
 *   binary and parsing back gave the same guarantee at ~3× the CPU — the
 *   largest Trellis-owned cost of an embedded turn at 32 in flight;
 *   docs/benchmarks.md, session 14);
 * - client interceptors wrap the call (`runUnaryCall` / `runStreamingCall`:
 *   deadline, signal), server interceptors wrap the implementation
 *   (`invokeUnaryImplementation` / `transformInvokeImplementation`), each
 *   side with its own context values and its own copy of the headers;
 * - the handler's context signal aborts when the call ends, however it ends
 *   (handlers release what they hold on it), and when the caller aborts or
 *   its deadline passes;
 * - errors reach the caller as they would through the Connect protocol:
 *   serialized to the Connect error JSON and parsed back (code, message,
 *   details as bytes, response headers and trailers as metadata); anything
 *   that is not a `ConnectError` becomes `internal`;
 * - a caller that aborts, or whose deadline passes, is answered at once
 *   (the handler's signal aborts; the caller does not wait for the handler
 *   to notice), as Connect's router transport does;
 * - a method with no handler is `unimplemented`.
 */
import {
  clone,
  create as createMessage,
  type DescMessage,
  type DescMethod,
  type DescMethodStreaming,
  type DescMethodUnary,
  isMessage,
  type MessageInitShape,
  type MessageShape,
} from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  type ConnectRouter,
  type ContextValues,
  createContextValues,
  createHandlerContext,
  createMethodImplSpec,
  createServiceImplSpec,
  type HandlerContext,
  type Interceptor,
  type MethodImplSpec,
  type StreamResponse,
  type Transport,
  type UnaryResponse,
} from "@connectrpc/connect";
import {
  createMethodUrl,
  getAbortSignalReason,
  invokeUnaryImplementation,
  runStreamingCall,
  runUnaryCall,
  transformInvokeImplementation,
} from "@connectrpc/connect/protocol";
import { errorFromJson, errorToJson } from "@connectrpc/connect/protocol-connect";

/** Options of {@link createInProcessTransport}. */
export interface InProcessTransportOptions {
  /** Registers the services, as for a Connect router. */
  routes: (router: ConnectRouter) => void;
  /** Around every implementation (server side), outermost first. */
  serverInterceptors?: Interceptor[];
  /** Around every call (client side), outermost first. */
  clientInterceptors?: Interceptor[];
}

const BASE_URL = "https://in-process";

/** What a call's headers may be given as (the DOM's `HeadersInit`). */
type HeadersSource = ConstructorParameters<typeof Headers>[0];

/** The handler context with the `abort` its creator ends the call with. */
type HandlerContextController = ReturnType<typeof createHandlerContext>;

/** Records the implementation of every method registered; a later one replaces an earlier (as Connect's router transport). */
function collectSpecs(routes: (router: ConnectRouter) => void): Map<DescMethod, MethodImplSpec> {
  const specs = new Map<DescMethod, MethodImplSpec>();
  const router: ConnectRouter = {
    handlers: [],
    service(service, implementation) {
      const spec = createServiceImplSpec(service, implementation);
      for (const method of service.methods) {
        const methodSpec = spec.methods[method.localName];
        if (methodSpec) specs.set(method, methodSpec);
      }
      return this;
    },
    rpc(method, impl) {
      specs.set(method, createMethodImplSpec(method, impl));
      return this;
    },
  };
  routes(router);
  return specs;
}

/**
 * The reason a handler's signal aborts with when its call is over. One shared
 * value: `abort()` without a reason builds a DOMException (and its stack)
 * per call. Canceled, as `ConnectError.from` reads an AbortError.
 */
const CALL_ENDED = new ConnectError("the call ended", Code.Canceled);

/**
 * A copy of `message` that shares no object with it, as the other side of a
 * wire would parse it. An init shape is built into a message first (`create`
 * may keep nested messages and arrays it is given), then copied.
 */
function copy<T extends DescMessage>(
  schema: T,
  message: MessageShape<T> | MessageInitShape<T>,
): MessageShape<T> {
  const full = isMessage(message, schema) ? message : createMessage(schema, message);
  return clone(schema, full);
}

/** The error as the caller would see it after the Connect protocol carried it. */
function asReceived(error: unknown, context: HandlerContext): ConnectError {
  const sent =
    error instanceof ConnectError
      ? error
      : new ConnectError("internal error", Code.Internal, undefined, undefined, error);
  const metadata = new Headers(context.responseHeader);
  for (const [key, value] of sent.metadata) metadata.set(key, value);
  for (const [key, value] of context.responseTrailer) metadata.set(key, value);
  return errorFromJson(errorToJson(sent, undefined), metadata, sent);
}

/** `promise`, or the abort reason of `signal` as soon as it aborts. */
function raceAbort<T>(signal: AbortSignal, promise: Promise<T>): Promise<T> {
  if (signal.aborted) return Promise.reject(getAbortSignalReason(signal));
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(getAbortSignalReason(signal));
    signal.addEventListener("abort", onAbort, { once: true });
  });
  return Promise.race([promise, aborted]).finally(() => {
    if (onAbort) signal.removeEventListener("abort", onAbort);
  });
}

/**
 * A {@link Transport} to the handlers `routes` registers, in this process.
 * See the module comment for what it keeps of the wire's behaviour.
 */
export function createInProcessTransport(options: InProcessTransportOptions): Transport {
  const specs = collectSpecs(options.routes);
  const serverInterceptors = options.serverInterceptors ?? [];
  const clientInterceptors = options.clientInterceptors ?? [];

  const specOf = (method: DescMethod): MethodImplSpec => {
    const spec = specs.get(method);
    if (!spec) {
      throw new ConnectError(
        `no handler registered for ${createMethodUrl("/", method)}`,
        Code.Unimplemented,
      );
    }
    return spec;
  };

  /** What both kinds of call start from: client options and the request's common part. */
  const callOf = (
    method: DescMethod,
    signal: AbortSignal | undefined,
    timeoutMs: number | undefined,
    header: HeadersSource | undefined,
    contextValues: ContextValues | undefined,
  ) => {
    // As Connect's transports: 0 or less means no deadline.
    const deadline = timeoutMs !== undefined && timeoutMs <= 0 ? undefined : timeoutMs;
    return {
      timeoutMs: deadline,
      options: {
        interceptors: clientInterceptors,
        ...(signal ? { signal } : {}),
        ...(deadline === undefined ? {} : { timeoutMs: deadline }),
      },
      request: {
        service: method.parent,
        requestMethod: "POST",
        url: createMethodUrl(BASE_URL, method),
        header: new Headers(header),
        contextValues: contextValues ?? createContextValues(),
      },
    };
  };

  const contextFor = (
    method: DescMethod,
    url: string,
    signal: AbortSignal,
    header: Headers,
    timeoutMs: number | undefined,
  ): HandlerContextController =>
    createHandlerContext({
      service: method.parent,
      method,
      protocolName: "connect",
      requestMethod: "POST",
      url,
      requestSignal: signal,
      requestHeader: header,
      contextValues: createContextValues(),
      ...(timeoutMs === undefined ? {} : { timeoutMs }),
    });

  return {
    async unary<I extends DescMessage, O extends DescMessage>(
      method: DescMethodUnary<I, O>,
      signal: AbortSignal | undefined,
      timeoutMs: number | undefined,
      header: HeadersSource | undefined,
      input: MessageInitShape<I>,
      contextValues?: ContextValues,
    ): Promise<UnaryResponse<I, O>> {
      const call = callOf(method, signal, timeoutMs, header, contextValues);
      return runUnaryCall<I, O>({
        ...call.options,
        req: { ...call.request, stream: false, method, message: input },
        next: async (req) => {
          const spec = specOf(method);
          if (spec.kind !== "unary") {
            throw new ConnectError(`${method.name} is not a unary method`, Code.Internal);
          }
          const context = contextFor(method, req.url, req.signal, req.header, call.timeoutMs);
          try {
            const output = await raceAbort(
              req.signal,
              invokeUnaryImplementation(
                spec,
                context,
                copy(method.input, req.message),
                serverInterceptors,
              ),
            );
            return {
              stream: false,
              service: method.parent,
              method,
              // The call is over: its context's headers are the caller's now.
              header: context.responseHeader,
              trailer: context.responseTrailer,
              message: copy(method.output, output as MessageShape<O>),
            };
          } catch (error) {
            context.abort(error);
            throw asReceived(error, context);
          } finally {
            context.abort(CALL_ENDED);
          }
        },
      });
    },

    async stream<I extends DescMessage, O extends DescMessage>(
      method: DescMethodStreaming<I, O>,
      signal: AbortSignal | undefined,
      timeoutMs: number | undefined,
      header: HeadersSource | undefined,
      input: AsyncIterable<MessageInitShape<I>>,
      contextValues?: ContextValues,
    ): Promise<StreamResponse<I, O>> {
      const call = callOf(method, signal, timeoutMs, header, contextValues);
      return runStreamingCall<I, O>({
        ...call.options,
        req: { ...call.request, stream: true, method, message: input },
        next: async (req) => {
          const spec = specOf(method);
          const context = contextFor(method, req.url, req.signal, req.header, call.timeoutMs);
          const requests = (async function* () {
            for await (const message of req.message) yield copy(method.input, message);
          })();
          const outputs = transformInvokeImplementation(
            spec,
            context,
            serverInterceptors,
          )(requests)[Symbol.asyncIterator]();
          const messages: AsyncIterator<MessageShape<O>> = {
            async next() {
              try {
                const result = await raceAbort(req.signal, outputs.next());
                // The handler's signal aborts however the stream ends (once:
                // a later abort is a no-op).
                if (result.done) {
                  context.abort(CALL_ENDED);
                  return { done: true, value: undefined };
                }
                return { done: false, value: copy(method.output, result.value as MessageShape<O>) };
              } catch (error) {
                const received = asReceived(error, context);
                context.abort(error);
                throw received;
              }
            },
            async return() {
              context.abort(CALL_ENDED);
              await outputs.return?.();
              return { done: true, value: undefined };
            },
          };
          return {
            stream: true,
            service: method.parent,
            method,
            // The implementation sets response headers before its first
            // message, trailers by its end: the caller reads them then.
            header: context.responseHeader,
            trailer: context.responseTrailer,
            message: { [Symbol.asyncIterator]: () => messages },
          };
        },
      });
    },
  };
}
