export { tasksService } from "./definition.js";
