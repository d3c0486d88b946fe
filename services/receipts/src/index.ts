export { receiptsService } from "./definition.js";
