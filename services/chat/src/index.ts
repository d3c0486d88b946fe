export { chatService } from "./definition.js";
