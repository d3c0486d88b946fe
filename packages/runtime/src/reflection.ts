/**
 * gRPC server reflection, v1 and v1alpha (grpc/reflection/v1/reflection.proto),
 * so `buf curl`, grpcurl, Postman and stubs in any language can discover and
 * call every service without a copy of our protos.
 *
 * The schema comes from the protobuf-es descriptors of the served services
 * (each `DescService` knows its `DescFile`, which knows its imports), plus
 * files registered explicitly (e.g. the ErrorDetail contract, so clients can
 * decode error details).
 */
import { type DescFile, type DescMessage, type DescService, toBinary } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { Code, type ServiceImpl } from "@connectrpc/connect";
import type { reflectionV1, reflectionV1alpha } from "@trellis/contracts/grpc";

/** What one reflection request is answered with, independent of protocol version. */
type Answer =
  | { case: "fileDescriptorResponse"; value: { fileDescriptorProto: Uint8Array[] } }
  | { case: "listServicesResponse"; value: { service: { name: string }[] } }
  | {
      case: "allExtensionNumbersResponse";
      value: { baseTypeName: string; extensionNumber: number[] };
    }
  | { case: "errorResponse"; value: { errorCode: number; errorMessage: string } };

/** The request part both versions share (the generated oneof has the same cases). */
type Question =
  | {
      case:
        | "fileByFilename"
        | "fileContainingSymbol"
        | "allExtensionNumbersOfType"
        | "listServices";
      value: string;
    }
  | { case: "fileContainingExtension"; value: { containingType: string; extensionNumber: number } }
  | { case: undefined; value?: undefined };

/**
 * Index of every file reachable from the served services, by file name,
 * fully-qualified symbol, and extension. Serialized descriptors are cached.
 * @internal
 */
export class ReflectionIndex {
  readonly #files = new Map<string, DescFile>();
  readonly #symbols = new Map<string, DescFile>();
  readonly #extensions = new Map<string, Map<number, DescFile>>();
  readonly #serialized = new Map<string, Uint8Array>();
  readonly #services: string[];

  constructor(services: Iterable<DescService>, files: Iterable<DescFile> = []) {
    const names = new Set<string>();
    for (const service of services) {
      names.add(service.typeName);
      this.#addFile(service.file);
    }
    for (const file of files) this.#addFile(file);
    this.#services = [...names].sort();
  }

  /** Fully-qualified names of the served services. */
  get services(): readonly string[] {
    return this.#services;
  }

  #addFile(file: DescFile): void {
    const name = file.proto.name;
    if (this.#files.has(name)) return;
    this.#files.set(name, file);
    const pkg = file.proto.package;
    for (const service of file.services) {
      this.#symbols.set(service.typeName, file);
      for (const method of service.methods)
        this.#symbols.set(`${service.typeName}.${method.name}`, file);
    }
    for (const message of file.messages) this.#addMessage(message, file);
    for (const e of file.enums) {
      this.#symbols.set(e.typeName, file);
      // Enum values are scoped like C++ enumerators: siblings of their enum.
      for (const v of e.values) this.#symbols.set(pkg ? `${pkg}.${v.name}` : v.name, file);
    }
    for (const ext of file.extensions)
      this.#addExtension(ext.typeName, ext.extendee.typeName, ext.number, file);
    for (const dep of file.dependencies) this.#addFile(dep);
  }

  #addMessage(message: DescMessage, file: DescFile): void {
    this.#symbols.set(message.typeName, file);
    for (const f of message.fields) this.#symbols.set(`${message.typeName}.${f.name}`, file);
    for (const o of message.oneofs) this.#symbols.set(`${message.typeName}.${o.name}`, file);
    for (const nested of message.nestedMessages) this.#addMessage(nested, file);
    for (const e of message.nestedEnums) {
      this.#symbols.set(e.typeName, file);
      for (const v of e.values) this.#symbols.set(`${message.typeName}.${v.name}`, file);
    }
    for (const ext of message.nestedExtensions) {
      this.#addExtension(ext.typeName, ext.extendee.typeName, ext.number, file);
    }
  }

  #addExtension(typeName: string, extendee: string, number: number, file: DescFile): void {
    this.#symbols.set(typeName, file);
    let byNumber = this.#extensions.get(extendee);
    if (byNumber === undefined) {
      byNumber = new Map();
      this.#extensions.set(extendee, byNumber);
    }
    byNumber.set(number, file);
  }

  #bytes(file: DescFile): Uint8Array {
    const name = file.proto.name;
    let bytes = this.#serialized.get(name);
    if (bytes === undefined) {
      bytes = toBinary(FileDescriptorProtoSchema, file.proto);
      this.#serialized.set(name, bytes);
    }
    return bytes;
  }

  /**
   * The file, then its transitive imports not yet sent on this stream (as
   * grpc-go does: clients cache what they received and ask for the rest).
   */
  #withDependencies(file: DescFile, sent: Set<string>): Answer {
    const out: Uint8Array[] = [this.#bytes(file)];
    sent.add(file.proto.name);
    const visited = new Set<string>([file.proto.name]);
    const queue = [...file.dependencies];
    for (let dep = queue.shift(); dep !== undefined; dep = queue.shift()) {
      const name = dep.proto.name;
      if (visited.has(name)) continue;
      visited.add(name);
      if (!sent.has(name)) {
        sent.add(name);
        out.push(this.#bytes(dep));
      }
      queue.push(...dep.dependencies);
    }
    return { case: "fileDescriptorResponse", value: { fileDescriptorProto: out } };
  }

  /** Answer one request; `sent` is the per-stream set of files already sent. */
  answer(question: Question, sent: Set<string>): Answer {
    switch (question.case) {
      case "listServices":
        return {
          case: "listServicesResponse",
          value: { service: this.#services.map((name) => ({ name })) },
        };
      case "fileByFilename": {
        const file = this.#files.get(question.value);
        return file
          ? this.#withDependencies(file, sent)
          : notFound(`file not found: ${question.value}`);
      }
      case "fileContainingSymbol": {
        // Clients sometimes send a leading dot (".pkg.Message").
        const symbol = question.value.startsWith(".") ? question.value.slice(1) : question.value;
        const file = this.#symbols.get(symbol);
        return file
          ? this.#withDependencies(file, sent)
          : notFound(`symbol not found: ${question.value}`);
      }
      case "fileContainingExtension": {
        const { containingType, extensionNumber } = question.value;
        const file = this.#extensions.get(containingType)?.get(extensionNumber);
        return file
          ? this.#withDependencies(file, sent)
          : notFound(`extension not found: ${containingType} ${extensionNumber}`);
      }
      case "allExtensionNumbersOfType": {
        const type = question.value;
        if (!this.#symbols.has(type)) return notFound(`type not found: ${type}`);
        const numbers = [...(this.#extensions.get(type)?.keys() ?? [])].sort((a, b) => a - b);
        return {
          case: "allExtensionNumbersResponse",
          value: { baseTypeName: type, extensionNumber: numbers },
        };
      }
      default:
        return {
          case: "errorResponse",
          value: { errorCode: Code.InvalidArgument, errorMessage: "empty reflection request" },
        };
    }
  }
}

function notFound(message: string): Answer {
  return { case: "errorResponse", value: { errorCode: Code.NotFound, errorMessage: message } };
}

/**
 * Implementations of reflection v1 and v1alpha. `index` is called on the
 * first request, once every route is registered.
 * @internal
 */
export function createReflectionImpls(index: () => ReflectionIndex): {
  v1: ServiceImpl<typeof reflectionV1.ServerReflection>;
  v1alpha: ServiceImpl<typeof reflectionV1alpha.ServerReflection>;
} {
  return {
    v1: { serverReflectionInfo: (requests) => answerEach(index, requests) },
    v1alpha: { serverReflectionInfo: (requests) => answerEach(index, requests) },
  };
}

/**
 * One reflection stream, of either version (they ask and answer alike):
 * each request answered from the index; a file is sent once per stream.
 */
async function* answerEach<Request extends { host: string; messageRequest: Question }>(
  index: () => ReflectionIndex,
  requests: AsyncIterable<Request>,
): AsyncGenerator<{ validHost: string; originalRequest: Request; messageResponse: Answer }> {
  const sent = new Set<string>();
  for await (const req of requests) {
    yield {
      validHost: req.host,
      originalRequest: req,
      messageResponse: index().answer(req.messageRequest, sent),
    };
  }
}
