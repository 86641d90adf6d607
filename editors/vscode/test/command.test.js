// Unit tests of how the extension finds and starts `torchlint server` (src/command.ts), outside
// VS Code: `npm test` (bundles src/command.ts to out/command.js first).
const assert = require("node:assert/strict");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const test = require("node:test");
const { resolveServerCommand, serverArgs, expandPath, which } = require("../out/command.js");

const base = { path: [], interpreter: [], args: [], preview: null };

function executable(dir, name) {
  const file = path.join(dir, name);
  fs.writeFileSync(file, "#!/bin/sh\n");
  fs.chmodSync(file, 0o755);
  return file;
}

test("server arguments: preview on, off, or left to pyproject.toml, then the extra args", () => {
  assert.deepEqual(serverArgs(base), ["server"]);
  assert.deepEqual(serverArgs({ ...base, preview: true }), ["server", "--preview"]);
  assert.deepEqual(serverArgs({ ...base, preview: false, args: ["--debounce-ms", "300"] }), ["server", "--no-preview", "--debounce-ms", "300"]);
});

test("torchlint.path wins, then torchlint.interpreter, then the Python extension, then PATH", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "torchlint-ext-"));
  const tl = executable(dir, "torchlint");
  const py = executable(dir, "python3");
  const home = os.homedir();
  assert.deepEqual(resolveServerCommand({ ...base, path: [tl] }, "/sel/python", dir, undefined, home),
    { command: tl, args: ["server"], source: "torchlint.path" });
  assert.deepEqual(resolveServerCommand({ ...base, interpreter: ["/venv/bin/python"] }, "/sel/python", dir, undefined, home),
    { command: "/venv/bin/python", args: ["-m", "torchlint", "server"], source: "torchlint.interpreter" });
  assert.deepEqual(resolveServerCommand(base, "/sel/python", dir, undefined, home),
    { command: "/sel/python", args: ["-m", "torchlint", "server"], source: "python extension" });
  assert.deepEqual(resolveServerCommand(base, undefined, dir, undefined, home),
    { command: py, args: ["-m", "torchlint", "server"], source: "PATH" });
});

test("a bare name in torchlint.path is looked up on PATH; ${workspaceFolder} and ~ expand", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "torchlint-ext-"));
  const tl = executable(dir, "torchlint");
  assert.equal(resolveServerCommand({ ...base, path: ["torchlint"] }, undefined, dir, undefined, "/h").command, tl);
  assert.equal(resolveServerCommand({ ...base, path: ["${workspaceFolder}/torchlint"] }, undefined, "", dir, "/h").command, tl);
  assert.equal(expandPath("~/.venv/bin/torchlint", undefined, "/home/u"), "/home/u/.venv/bin/torchlint");
  assert.equal(expandPath("${userHome}/x", "/w", "/home/u"), "/home/u/x");
});

test("clear errors when nothing can run the server", () => {
  assert.throws(() => resolveServerCommand({ ...base, path: ["/nope/torchlint"] }, undefined, "", undefined, "/h"),
    /none of torchlint.path exists or is executable: \/nope\/torchlint/);
  assert.throws(() => resolveServerCommand(base, undefined, "", undefined, "/h"), /no Python found/);
  assert.equal(which(["python3"], ""), undefined);
});
