/** The webview's side of the host channel (typed messages, persisted panel state). */
import type { HostMessage, PanelState, WebviewMessage } from "../shared/messages";

interface VsCodeApi {
  postMessage(msg: unknown): void;
  getState(): unknown;
  setState(state: unknown): void;
}

declare function acquireVsCodeApi(): VsCodeApi;

const api: VsCodeApi = acquireVsCodeApi();

export function post(msg: WebviewMessage): void {
  api.postMessage(msg);
}

export function getState(): Partial<PanelState> | undefined {
  const s = api.getState();
  return s && typeof s === "object" ? (s as Partial<PanelState>) : undefined;
}

export function setState(state: PanelState): void {
  api.setState(state);
}

export function onHostMessage(handler: (msg: HostMessage) => void): void {
  window.addEventListener("message", (event: MessageEvent) => {
    const msg = event.data as HostMessage | undefined;
    if (msg && typeof msg === "object" && typeof msg.type === "string") handler(msg);
  });
}
