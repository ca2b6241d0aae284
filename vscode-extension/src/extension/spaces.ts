/**
 * Design space functions of a document, as the server's "Tune with this space" code lenses list
 * them (docs/spaces.md): the palette command picks one without a request of its own.
 * No `vscode` import, so it is unit tested under node.
 */
import * as P from "../shared/protocol";

export interface LensCommand {
  line: number;
  command?: string;
  arguments?: unknown[];
}

export interface SpaceChoice {
  name: string;
  line: number;
}

/** One entry per space function (the lens pair alone / union gives it once), in file order. */
export function spaceChoices(lenses: LensCommand[]): SpaceChoice[] {
  const seen = new Map<string, SpaceChoice>();
  for (const lens of lenses) {
    if (lens.command !== P.CMD_TUNE) continue;
    const arg = (lens.arguments?.[0] ?? {}) as P.TuneArgs;
    if (typeof arg.space === "string" && arg.space && !seen.has(arg.space)) seen.set(arg.space, { name: arg.space, line: lens.line });
  }
  return [...seen.values()].sort((a, b) => a.line - b.line);
}
