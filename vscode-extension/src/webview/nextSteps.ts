/**
 * Design principles as next steps (asight_lsp/views/principles.py `next_step`): what to do with each
 * principle and the command that does it; when nothing is significant yet, the ranges closest to it
 * with a rough estimate of the trials that would settle them.
 */
import { arr, h, num, obj, str } from "./dom";

/** One principle's next step: a sentence and the CLI command (selectable text). */
export function nextStep(step: unknown): HTMLElement | null {
  const s = obj(step);
  if (!s.text) return null;
  return h("div", { class: "next-step", "data-kind": str(s.kind) },
    h("span", { class: "hint" }, `Next: ${str(s.text)}`),
    s.cli ? h("code", { class: "cli", title: "Run in a terminal (or use Re-tune with principles in the editor)" }, str(s.cli)) : null);
}

/** The ranges closest to significance, each with its estimate and next step (null when none). */
export function closestRanges(payload: unknown): HTMLElement | null {
  const list = arr(obj(payload).closest).map(obj);
  if (!list.length) return null;
  return h("div", { class: "closest" },
    h("h3", {}, "Closest to significant"),
    h("ol", {}, ...list.map((c) => {
      const settle = obj(c.settle);
      const need = num(settle.candidates_needed);
      return h("li", {}, str(c.text),
        need !== null ? h("p", { class: "hint settle" }, `≈ ${need.toLocaleString("en")} measured candidates would settle it ` +
          `(effect size d = ${(num(settle.effect_size_d) ?? 0).toFixed(2)}; an estimate: ${str(settle.note)})`) : null,
        nextStep(c.next_step));
    })));
}
