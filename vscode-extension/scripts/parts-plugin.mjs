// esbuild plugin: a bundle of one part (extension host / webview) may not import the other part's
// source folder; both may import src/shared/. Used by build.mjs and its unit test.
import * as path from "node:path";

/**
 * @param {string} srcDir absolute path of src/
 * @param {string} name the part being built (for the message)
 * @param {string[]} forbidden folder names under src/ this part must not import
 */
export function partsPlugin(srcDir, name, forbidden) {
  return {
    name: `parts-${name}`,
    setup(build) {
      build.onResolve({ filter: /^\./ }, (args) => {
        const target = path.resolve(args.resolveDir, args.path);
        const bad = forbidden.find((dir) => target === path.join(srcDir, dir) || target.startsWith(path.join(srcDir, dir) + path.sep));
        if (!bad) return undefined;
        return { errors: [{ text: `${name} code must not import src/${bad}/ (${args.path})` }] };
      });
    },
  };
}
