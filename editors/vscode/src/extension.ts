// The torchlint extension: runs `torchlint server` (the language server in torchlint/server.py)
// from the selected Python environment or a configured path, and connects it to VS Code with
// vscode-languageclient: diagnostics (with each rule's page and the reason behind a finding),
// quick fixes, "ignore this line", fix-all (`source.fixAll.torchlint`), in Python files and in
// the notebook editor (LSP notebook document sync: a notebook's code cells are one program).
import { execFile } from "child_process";
import * as os from "os";
import * as vscode from "vscode";
import {
  LanguageClient,
  LanguageClientOptions,
  RevealOutputChannelOn,
  ServerOptions,
} from "vscode-languageclient/node";
import { resolveServerCommand, ServerCommand, ServerSettings } from "./command";

const FIX_ALL_KIND = "source.fixAll.torchlint";
const NOTEBOOK_FIX_ALL_KIND = "notebook.source.fixAll.torchlint";

let client: LanguageClient | undefined;
let output: vscode.LogOutputChannel;
let pythonWatch: vscode.Disposable | undefined;
// Starts and restarts run one after another (a settings change during a start waits for it).
let queue: Promise<void> = Promise.resolve();

interface PythonEnvironmentsApi {
  getActiveEnvironmentPath(resource?: vscode.Uri): { path: string };
  resolveEnvironment(env: { path: string } | string): Promise<{ executable: { uri?: vscode.Uri } } | undefined>;
  onDidChangeActiveEnvironmentPath: vscode.Event<unknown>;
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  output = vscode.window.createOutputChannel("torchlint", { log: true });
  context.subscriptions.push(
    output,
    vscode.commands.registerCommand("torchlint.restart", () => schedule(restart)),
    vscode.commands.registerCommand("torchlint.showLogs", () => output.show()),
    vscode.commands.registerCommand("torchlint.fixAll", fixAll),
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration("torchlint")) {
        schedule(restart);
      }
    }),
    vscode.workspace.onDidChangeWorkspaceFolders(() => schedule(restart)),
    { dispose: () => pythonWatch?.dispose() },
  );
  await schedule(start);
}

export async function deactivate(): Promise<void> {
  await stop();
}

function schedule(step: () => Promise<void>): Promise<void> {
  queue = queue.then(step, step);
  return queue;
}

function settings(resource: vscode.Uri | undefined): ServerSettings & { enable: boolean; notebooks: boolean } {
  const config = vscode.workspace.getConfiguration("torchlint", resource);
  return {
    enable: config.get<boolean>("enable", true),
    path: config.get<string[]>("path", []),
    interpreter: config.get<string[]>("interpreter", []),
    args: config.get<string[]>("args", []),
    preview: config.get<boolean | null>("preview", null),
    notebooks: config.get<boolean>("notebooks.enable", true),
  };
}

/** The interpreter selected in the Python extension (ms-python.python), if it is installed. */
async function selectedPython(resource: vscode.Uri | undefined): Promise<string | undefined> {
  const extension = vscode.extensions.getExtension("ms-python.python");
  if (!extension) {
    return undefined;
  }
  try {
    if (!extension.isActive) {
      await extension.activate();
    }
    const api: PythonEnvironmentsApi | undefined = extension.exports?.environments;
    if (!api) {
      return undefined;
    }
    if (!pythonWatch) {
      pythonWatch = api.onDidChangeActiveEnvironmentPath(() => schedule(restart));
    }
    const env = await api.resolveEnvironment(api.getActiveEnvironmentPath(resource));
    return env?.executable.uri?.fsPath;
  } catch (err) {
    output.warn(`cannot ask the Python extension for the selected interpreter: ${err}`);
    return undefined;
  }
}

/** Whether `python` can run the server; the message to show when it cannot. */
function checkPython(python: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    execFile(python, ["-c", "import torchlint, pygls.lsp.server, lsprotocol"], { timeout: 30000 }, (err, _out, stderr) => {
      if (!err) {
        resolve(undefined);
      } else if (/ModuleNotFoundError|ImportError/.test(stderr)) {
        resolve(`torchlint's language server is not installed for ${python}: run \`${python} -m pip install "torchlint[lsp]"\`, or select another interpreter.`);
      } else {
        resolve(`cannot run ${python}: ${(stderr || String(err)).trim().split("\n").pop()}`);
      }
    });
  });
}

async function start(): Promise<void> {
  const folder = vscode.workspace.workspaceFolders?.[0];
  const config = settings(folder?.uri);
  if (!config.enable) {
    output.info("torchlint.enable is false: the server is not started");
    return;
  }
  let command: ServerCommand;
  try {
    command = resolveServerCommand(config, await selectedPython(folder?.uri), process.env.PATH, folder?.uri.fsPath, os.homedir());
  } catch (err) {
    const message = `torchlint: ${err instanceof Error ? err.message : err}`;
    output.error(message);
    void vscode.window.showErrorMessage(message, "Show Logs").then((pick) => pick && output.show());
    return;
  }
  if (command.source !== "torchlint.path") {
    const problem = await checkPython(command.command);
    if (problem) {
      output.error(problem);
      void vscode.window.showErrorMessage(`torchlint: ${problem}`, "Show Logs").then((pick) => pick && output.show());
      return;
    }
  }
  output.info(`starting ${command.command} ${command.args.join(" ")} (from ${command.source})`);

  const serverOptions: ServerOptions = {
    // stdio, without a transport: TransportKind.stdio would append `--stdio` to the arguments.
    command: command.command,
    args: command.args,
    options: { cwd: folder?.uri.fsPath ?? os.homedir(), env: { ...process.env, PYTHONUNBUFFERED: "1" } },
  };
  const notebooks = config.notebooks;
  const clientOptions: LanguageClientOptions = {
    documentSelector: [
      { scheme: "file", language: "python" },
      { scheme: "untitled", language: "python" },
      // Notebook cells: synced with their notebook (notebookDocument/*), listed here so that
      // their quick fixes and fix-all reach the server.
      ...(notebooks ? [{ scheme: "vscode-notebook-cell", language: "python" }] : []),
    ],
    diagnosticCollectionName: "torchlint",
    outputChannel: output,
    traceOutputChannel: output,
    revealOutputChannelOn: RevealOutputChannelOn.Never,
    middleware: notebooks
      ? undefined
      : {
          // torchlint.notebooks.enable = false: notebooks are not sent to the server at all.
          notebooks: {
            didOpen: async () => undefined,
            didChange: async () => undefined,
            didSave: async () => undefined,
            didClose: async () => undefined,
          },
        },
  };
  client = new LanguageClient("torchlint", "torchlint", serverOptions, clientOptions);
  try {
    await client.start();
  } catch (err) {
    output.error(`the torchlint server did not start: ${err}`);
    void vscode.window.showErrorMessage(`torchlint: the server did not start (${err}).`, "Show Logs").then((pick) => pick && output.show());
  }
}

async function stop(): Promise<void> {
  const running = client;
  client = undefined;
  if (running) {
    try {
      await running.stop();
    } catch (err) {
      output.warn(`stopping the server: ${err}`);
    }
  }
}

async function restart(): Promise<void> {
  await stop();
  await start();
}

/** "torchlint: Fix all auto-fixable problems": the file's (or the whole notebook's) safe fixes. */
async function fixAll(): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  if (!editor) {
    return;
  }
  const document = editor.document;
  const kind = document.uri.scheme === "vscode-notebook-cell" ? NOTEBOOK_FIX_ALL_KIND : FIX_ALL_KIND;
  const actions = await vscode.commands.executeCommand<vscode.CodeAction[]>(
    "vscode.executeCodeActionProvider",
    document.uri,
    new vscode.Range(0, 0, 0, 0),
    kind,
    1,
  );
  const action = (actions || []).find((a) => a.kind?.value === kind && a.edit);
  if (action?.edit) {
    await vscode.workspace.applyEdit(action.edit);
  } else {
    void vscode.window.showInformationMessage("torchlint: nothing to fix");
  }
}
