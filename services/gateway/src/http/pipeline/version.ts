/**
 * Stage `version`: every route but a public one needs a supported
 * `Harn-Agents-Protocol-Version` (426 otherwise). It comes before
 * authentication: the version decides how everything else in the request is
 * read, the supported versions are public (discovery), and a client on the
 * wrong version learns that first instead of debugging its key.
 */
import { harnError } from "../../domain/errors.js";
import {
  checkProtocolVersion,
  protocolVersionHeader,
  supportedProtocolVersions,
} from "../../domain/protocol.js";
import { errorResponse } from "../io.js";
import type { Stage } from "./stage.js";

export const versionStage: Stage = (next) => async (exchange) => {
  if (exchange.route.scope === "public") return next(exchange);
  const version = checkProtocolVersion(exchange.call.req.headers[protocolVersionHeader]);
  if (version.ok) return next(exchange);
  const supported = supportedProtocolVersions.join(", ");
  const message =
    version.reason === "missing"
      ? `the Harn-Agents-Protocol-Version header is required; supported: ${supported}`
      : `protocol version ${JSON.stringify(version.given?.slice(0, 64))} is not supported; supported: ${supported}`;
  return errorResponse(
    harnError("unsupported_protocol_version", message, {
      requestId: exchange.call.requestId,
      param: "Harn-Agents-Protocol-Version",
      details: { supported_versions: [...supportedProtocolVersions] },
    }),
  );
};
