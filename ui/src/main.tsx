import { render } from "preact";
import { App } from "./app.tsx";
import "./styles.css";
import "./transcript.css";
import "./panels.css";

render(<App />, document.getElementById("app")!);
