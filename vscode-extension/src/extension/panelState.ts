/** Panel state as the host keeps and restores it (pure; the state comes from webview storage). */
import type { PanelKind, PanelState } from "../shared/messages";
import type * as P from "../shared/protocol";

/** Only the string fields of the view arguments (uri, function, run, task). */
export function cleanArgs(args: P.ViewArgs): P.ViewArgs {
  const out: P.ViewArgs = {};
  if (typeof args.uri === "string") out.uri = args.uri;
  if (typeof args.function === "string") out.function = args.function;
  if (typeof args.run === "string") out.run = args.run;
  if (typeof args.task === "string") out.task = args.task;
  return out;
}

/** The panel state a reloaded window hands back (validated: it comes from webview storage). */
export function restoreState(kind: PanelKind, state: unknown): PanelState {
  const s = (state && typeof state === "object" ? state : {}) as Partial<PanelState>;
  const args = s.args && typeof s.args === "object" ? cleanArgs(s.args) : {};
  return { kind, args, cell: typeof s.cell === "number" ? s.cell : null };
}

