// esbuild bundles the stylesheet imported by main.ts into out/webview/main.css.
declare module "*.css";
