/** Is a Python document TVMScript? (decides when the extension starts the language server) */

const TVMSCRIPT = /^[ \t]*@(?:T\.prim_func|I\.ir_module|R\.function|tvm\.script\.)|^[ \t]*from[ \t]+tvm\.script[ \t]+import|^[ \t]*(?:import|from)[ \t]+tvm\.script\b/m;

/** True when the text has a TVMScript decorator or imports `tvm.script`. */
export function isTvmScript(text: string): boolean {
  return TVMSCRIPT.test(text);
}
