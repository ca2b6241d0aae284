/** Webview entry: receive payloads from the extension host and draw the panel of this kind. */
import "./style.css";
import { PANEL_KINDS, type HostMessage, type PanelKind, type ShowMessage } from "../shared/messages";
import { isUnavailable } from "../shared/protocol";
import { unavailable } from "./common";
import { h, mount } from "./dom";
import { getState, onHostMessage, post, setState } from "./host";
import { renderHotspots } from "./hotspots";
import { renderLoopView } from "./loopView";
import { addTaskSelector, renderModel } from "./model";
import { renderSearchSpace } from "./searchSpace";
import { renderStageGraph } from "./stageGraph";
import { appendFailures } from "./failures";

const root = document.getElementById("app")!;
const bodyKind = document.body.dataset.kind as PanelKind;
const kind: PanelKind = (PANEL_KINDS as readonly string[]).includes(bodyKind) ? bodyKind : "searchSpace";
let cell: number | null = typeof getState()?.cell === "number" ? (getState()!.cell as number) : null;
let last: ShowMessage | undefined;

function draw(msg: ShowMessage): void {
  const started = performance.now();
  const runId = (p: unknown) => (p as { run?: { id?: unknown } } | null)?.run?.id;
  if (last && runId(last.payload) !== runId(msg.payload)) cell = null; // another run: the old cell means nothing
  last = msg;
  setState({ kind, args: msg.args, cell });
  if (isUnavailable(msg.payload)) {
    mount(root, unavailable(kind, msg));
  } else if (kind === "searchSpace") {
    renderSearchSpace(root, msg, cell, (c) => {
      if (c === cell) return;
      cell = c;
      setState({ kind, args: msg.args, cell });
      post({ type: "state", cell });
    });
  } else if (kind === "loopView") {
    renderLoopView(root, msg);
  } else if (kind === "stageGraph") {
    renderStageGraph(root, msg);
  } else if (kind === "model") {
    renderModel(root, msg);
  } else {
    renderHotspots(root, msg);
  }
  if (kind === "searchSpace" || kind === "loopView") addTaskSelector(root, msg);
  if (!isUnavailable(msg.payload)) appendFailures(root, msg.payload);
  document.body.dataset.rendered = String(Date.now());
  document.body.dataset.renderMs = (performance.now() - started).toFixed(1);
}

/** "Loading hotspots… 12 s" with a Cancel button once the host says it is taking long. */
function loading(message: string, elapsedS: number | undefined): HTMLElement {
  if (typeof elapsedS !== "number") return h("p", { class: "status", role: "status" }, message);
  const cancel = h("button", { type: "button", class: "secondary cancel" }, "Cancel");
  cancel.addEventListener("click", () => post({ type: "cancel" }));
  return h("div", { class: "loading" }, h("p", { class: "status", role: "status" },
    `${message} ${elapsedS} s — the TVM worker is measuring or building (the first time for a run)`), cancel);
}

function handle(msg: HostMessage): void {
  try {
    if (msg.type === "show") draw(msg);
    else if (msg.type === "loading") { if (!last) mount(root, loading(msg.message, msg.elapsedS)); }
    else if (msg.type === "error") mount(root, h("p", { class: "error", role: "alert" }, msg.message));
  } catch (err) {
    mount(root, h("p", { class: "error", role: "alert" }, `Cannot draw this payload: ${String(err)}`));
  }
}

onHostMessage(handle);
post({ type: "ready" });
