/**
 * The language server's lifecycle: start `asight serve --stdio` with the configured interpreter,
 * restart it on a crash (with a message), log to the "ASight" output channel, expose its state.
 */
import * as os from "node:os";
import * as vscode from "vscode";
import {
  CloseAction, ErrorAction, LanguageClient, State, type LanguageClientOptions, type Middleware,
  type ServerOptions, type StaticFeature,
} from "vscode-languageclient/node";
import * as P from "../shared/protocol";
import { RestartPolicy } from "./restartPolicy";
import { initializationOptions, readSettings, serverCommand, type Settings } from "./settings";

/** esbonio-style engine states, as the extension sees them. */
export enum ServerState {
  Stopped = "stopped",
  Starting = "starting",
  Running = "running",
  Errored = "errored",
}

/** Selector of the documents the server handles (TVMScript lives in Python files). */
export const DOCUMENT_SELECTOR = [{ scheme: "file", language: "python" }];

/**
 * The extension runs its own cancellable `window.withProgress` from `asight/runUpdated`, so it tells
 * the server it cannot show work-done progress (languageclient would otherwise draw a second,
 * non-cancellable one in the status bar).
 */
class NoServerProgress implements StaticFeature {
  getState() { return { kind: "static" as const }; }
  fillClientCapabilities(caps: { window?: { workDoneProgress?: boolean } }): void {
    caps.window = { ...(caps.window ?? {}), workDoneProgress: false };
  }
  initialize(): void { /* nothing */ }
  clear(): void { /* nothing */ }
}

export function workspaceFolder(): string | undefined {
  return vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
}

export function currentSettings(): Settings {
  const cfg = vscode.workspace.getConfiguration("asight");
  return readSettings((key) => cfg.get(key));
}

export class ServerManager implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private readonly policy = new RestartPolicy();
  private readonly stateEmitter = new vscode.EventEmitter<ServerState>();
  private readonly clientEmitter = new vscode.EventEmitter<LanguageClient>();
  private startPromise: Promise<LanguageClient | undefined> | undefined;
  private stopping = false;
  /** Whether the current client ever reached "running" (a server that dies on start is not restarted). */
  private reachedRunning = false;
  state: ServerState = ServerState.Stopped;
  /** Fires with the new state. */
  readonly onDidChangeState = this.stateEmitter.event;
  /** Fires with each client that reached "running" (after a restart too): register handlers here. */
  readonly onDidStartClient = this.clientEmitter.event;

  constructor(readonly output: vscode.LogOutputChannel, private readonly middleware: Middleware) {}

  get running(): LanguageClient | undefined {
    return this.client && this.client.state === State.Running ? this.client : undefined;
  }

  /** Start the server once (later calls wait for the same start). */
  ensureStarted(): Promise<LanguageClient | undefined> {
    if (this.running) return Promise.resolve(this.client);
    this.startPromise ??= this.start().finally(() => { this.startPromise = undefined; });
    return this.startPromise;
  }

  private setState(state: ServerState): void {
    if (this.state === state) return;
    this.state = state;
    this.output.info(`server state: ${state}`);
    this.stateEmitter.fire(state);
  }

  private async start(): Promise<LanguageClient | undefined> {
    const settings = currentSettings();
    const ws = workspaceFolder();
    const cmd = serverCommand(settings, ws, os.homedir());
    const serverOptions: ServerOptions = {
      command: cmd.command, args: cmd.args,
      options: { cwd: ws, env: { ...process.env, ...cmd.env, PYTHONUNBUFFERED: "1" } },
    };
    const clientOptions: LanguageClientOptions = {
      documentSelector: DOCUMENT_SELECTOR,
      outputChannel: this.output,
      initializationOptions: initializationOptions(settings, vscode.workspace.isTrusted, ws, os.homedir()),
      middleware: this.middleware,
      errorHandler: {
        error: (error, _message, count) => {
          this.output.error(`connection error: ${error.message}`);
          return { action: (count ?? 0) <= 3 ? ErrorAction.Continue : ErrorAction.Shutdown, handled: true };
        },
        closed: () => this.closed(),
      },
    };
    this.output.info(`starting: ${cmd.command} ${cmd.args.join(" ")}`);
    this.setState(ServerState.Starting);
    const client = new LanguageClient("asight", "ASight", serverOptions, clientOptions);
    client.registerFeature(new NoServerProgress());
    this.client = client;
    this.reachedRunning = false;
    client.onDidChangeState((e) => {
      if (client !== this.client) return;
      if (e.newState === State.Running) {
        this.reachedRunning = true;
        this.setState(ServerState.Running);
        this.clientEmitter.fire(client);
      } else if (e.newState === State.Stopped && this.state !== ServerState.Errored) {
        this.setState(this.stopping ? ServerState.Stopped : ServerState.Errored);
      }
    });
    try {
      await client.start();
      return client;
    } catch (err) {
      this.setState(ServerState.Errored);
      const msg = `ASight: the language server did not start (${cmd.command} -I -m asight_lsp serve): ${errorText(err)}. ` +
        "Set 'asight.pythonPath' to an interpreter that has ASight installed.";
      this.output.error(msg);
      void vscode.window.showErrorMessage(msg, "Open Settings", "Show Output").then((pick) => {
        if (pick === "Open Settings") void vscode.commands.executeCommand("workbench.action.openSettings", "asight.pythonPath");
        if (pick === "Show Output") this.output.show();
      });
      this.client = undefined;
      return undefined;
    }
  }

  /** The connection closed: restart with a message, unless it crashed too often. */
  private closed() {
    if (this.stopping) return { action: CloseAction.DoNotRestart, handled: true };
    if (!this.reachedRunning) return { action: CloseAction.DoNotRestart, handled: true }; // start() reports it
    if (this.policy.crashed()) {
      const msg = `ASight: the language server stopped unexpectedly; restarting it (${this.policy.recent} of ` +
        `${this.policy.limit} restarts in 3 minutes).`;
      this.output.warn(msg);
      void vscode.window.showWarningMessage(msg, "Show Output").then((p) => p && this.output.show());
      this.setState(ServerState.Starting);
      return { action: CloseAction.Restart, handled: true };
    }
    const msg = "ASight: the language server crashed 5 times in 3 minutes and was not restarted. " +
      "See the ASight output, then run 'ASight: Restart Server'.";
    this.output.error(msg);
    void vscode.window.showErrorMessage(msg, "Show Output").then((p) => p && this.output.show());
    this.setState(ServerState.Errored);
    return { action: CloseAction.DoNotRestart, handled: true };
  }

  async restart(): Promise<LanguageClient | undefined> {
    await this.stop();
    this.policy.reset();
    return this.ensureStarted();
  }

  async stop(): Promise<void> {
    const client = this.client;
    if (!client) return;
    this.stopping = true;
    try {
      if (client.state !== State.Stopped) await client.stop(5000);
    } catch (err) {
      this.output.warn(`stop: ${errorText(err)}`);
    } finally {
      this.client = undefined;
      this.stopping = false;
      this.setState(ServerState.Stopped);
    }
  }

  /** Tell a running server about changed settings (keys of the shared protocol). */
  async sendConfiguration(settings: Settings): Promise<void> {
    const client = this.running;
    if (!client) return;
    const asight = initializationOptions(settings, vscode.workspace.isTrusted, workspaceFolder(), os.homedir());
    await client.sendNotification("workspace/didChangeConfiguration", { settings: { asight } });
  }

  /** The user trusted the workspace: tell the server (it ignores `trusted` in configuration changes). */
  async grantTrust(settings: Settings): Promise<void> {
    const client = this.running;
    if (!client) return;
    await client.sendNotification(P.NOTIFY_WORKSPACE_TRUSTED, {});
    await this.sendConfiguration(settings);
  }

  /** A server command through workspace/executeCommand (one argument object). */
  async executeCommand<T = unknown>(command: string, args: object): Promise<T> {
    const client = await this.ensureStarted();
    if (!client) throw new Error("the ASight language server is not running");
    return client.sendRequest("workspace/executeCommand", { command, arguments: [args] }) as Promise<T>;
  }

  /** A custom request (`asight/...`). */
  async request<T = unknown>(method: string, params: object, token?: vscode.CancellationToken): Promise<T> {
    const client = await this.ensureStarted();
    if (!client) throw new Error("the ASight language server is not running");
    return (token ? client.sendRequest(method, params, token) : client.sendRequest(method, params)) as Promise<T>;
  }

  /** `asight/status` of the running server. */
  status(): Promise<P.ServerStatus> {
    return this.request<P.ServerStatus>(P.REQ_STATUS, {});
  }

  dispose(): void {
    void this.stop();
    this.stateEmitter.dispose();
    this.clientEmitter.dispose();
  }
}

export function errorText(err: unknown): string {
  if (err instanceof Error) return err.message;
  if (typeof err === "object" && err && "message" in err) return String((err as { message: unknown }).message);
  return String(err);
}
