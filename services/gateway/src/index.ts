export { gatewayService } from "./definition.js";
