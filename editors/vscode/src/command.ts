// How the extension starts `torchlint server`: pure logic (no `vscode` import), so that it is
// unit-tested with node's test runner outside VS Code (test/command.test.js).
import * as fs from "fs";
import * as path from "path";

export interface ServerSettings {
  /** `torchlint` executables to run as `<path> server`; the first that exists wins. */
  path: string[];
  /** Python interpreters to run `-m torchlint server` with (when `path` is empty). */
  interpreter: string[];
  /** Extra arguments after `server`. */
  args: string[];
  /** true/false: `--preview`/`--no-preview`; null: leave it to pyproject.toml. */
  preview: boolean | null;
}

export interface ServerCommand {
  command: string;
  args: string[];
  /** Where the command came from, for the log: a setting, the Python extension, or PATH. */
  source: "torchlint.path" | "torchlint.interpreter" | "python extension" | "PATH";
}

/** `${workspaceFolder}`, `${userHome}` and `~` in a configured path. */
export function expandPath(value: string, workspaceFolder: string | undefined, home: string): string {
  let out = value.replace(/\$\{userHome\}/g, home);
  if (workspaceFolder !== undefined) {
    out = out.replace(/\$\{workspaceFolder\}/g, workspaceFolder);
  }
  if (out === "~" || out.startsWith("~/")) {
    out = path.join(home, out.slice(1));
  }
  return out;
}

/** The first executable named `names` on `PATH` (as a shell would find it), or undefined. */
export function which(names: string[], envPath: string | undefined, isWindows = process.platform === "win32"): string | undefined {
  const dirs = (envPath || "").split(path.delimiter).filter((d) => d.length > 0);
  const exts = isWindows ? [".exe", ".cmd", ".bat", ""] : [""];
  for (const name of names) {
    for (const dir of dirs) {
      for (const ext of exts) {
        const candidate = path.join(dir, name + ext);
        if (isExecutable(candidate)) {
          return candidate;
        }
      }
    }
  }
  return undefined;
}

export function isExecutable(file: string): boolean {
  try {
    const st = fs.statSync(file);
    if (!st.isFile()) {
      return false;
    }
    fs.accessSync(file, fs.constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

export function serverArgs(settings: ServerSettings): string[] {
  const args = ["server"];
  if (settings.preview === true) {
    args.push("--preview");
  } else if (settings.preview === false) {
    args.push("--no-preview");
  }
  return args.concat(settings.args);
}

/**
 * The command for `torchlint server`, in the order the ruff extension uses: an explicit
 * `torchlint.path`, an explicit `torchlint.interpreter`, the Python extension's selected
 * environment, then `python3`/`python` on PATH. Throws with a message for the user when
 * nothing can run it.
 */
export function resolveServerCommand(
  settings: ServerSettings,
  selectedPython: string | undefined,
  envPath: string | undefined,
  workspaceFolder: string | undefined,
  home: string,
): ServerCommand {
  const args = serverArgs(settings);
  if (settings.path.length > 0) {
    const paths = settings.path.map((p) => expandPath(p, workspaceFolder, home));
    for (const p of paths) {
      const found = p.includes(path.sep) || p.includes("/") ? (isExecutable(p) ? p : undefined) : which([p], envPath);
      if (found) {
        return { command: found, args, source: "torchlint.path" };
      }
    }
    throw new Error(`none of torchlint.path exists or is executable: ${paths.join(", ")}`);
  }
  const moduleArgs = ["-m", "torchlint"].concat(args);
  if (settings.interpreter.length > 0) {
    const python = expandPath(settings.interpreter[0], workspaceFolder, home);
    return { command: python, args: moduleArgs, source: "torchlint.interpreter" };
  }
  if (selectedPython) {
    return { command: selectedPython, args: moduleArgs, source: "python extension" };
  }
  const python = which(["python3", "python"], envPath);
  if (python) {
    return { command: python, args: moduleArgs, source: "PATH" };
  }
  throw new Error("no Python found: select an interpreter (Python extension), or set torchlint.interpreter or torchlint.path");
}
