export { adaptersService } from "./definition.js";
