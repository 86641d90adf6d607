// VS Code end to end: the torchlint .vsix installed into code-server (VS Code in a browser),
// driven by headless Chromium through playwright-core. Opens a training file and a notebook,
// checks torchlint's findings in the Problems panel and as squiggles, applies a quick fix in each
// and checks the file changed on disk. Run by scripts/e2e/run, which installs everything first.
//
// Environment: CODE_SERVER (the code-server launcher), VSIX, CHROMIUM, E2E_OUT (screenshots),
// TORCHLINT_BIN_DIR (a directory whose `python3` can run `python -m torchlint server`).
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, "..", "..");
const require = createRequire(path.join(repo, "editors", "vscode", "package.json"));
const { chromium } = require("playwright-core");

const codeServer = process.env.CODE_SERVER;
const vsix = process.env.VSIX || path.join(repo, "editors", "vscode", "dist", "torchlint.vsix");
const browserPath = process.env.CHROMIUM || "/usr/bin/chromium";
const shots = process.env.E2E_OUT || fs.mkdtempSync(path.join(os.tmpdir(), "torchlint-e2e-shots-"));
fs.mkdirSync(shots, { recursive: true });

const TIMEOUT = 90_000;
const log = (...a) => console.log(`[vscode ${new Date().toISOString().slice(11, 19)}]`, ...a);

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function waitHttp(url, ms) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    try {
      const r = await fetch(url);
      if (r.status < 500) return;
    } catch {}
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error(`${url} did not answer in ${ms / 1000} s`);
}

async function main() {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "torchlint-e2e-vscode-"));
  const workspace = path.join(tmp, "project");
  const userData = path.join(tmp, "user-data");
  const extensions = path.join(tmp, "extensions");
  fs.mkdirSync(workspace);
  fs.mkdirSync(path.join(userData, "User"), { recursive: true });
  fs.copyFileSync(path.join(repo, "fixtures", "TL201.py"), path.join(workspace, "train.py"));
  fs.copyFileSync(path.join(repo, "fixtures", "notebooks", "train.ipynb"), path.join(workspace, "train.ipynb"));
  fs.writeFileSync(path.join(workspace, "pyproject.toml"), "[tool.torchlint]\n");
  // The interpreter that runs `python -m torchlint server`, as a user picks it (without the
  // Python extension, which code-server cannot fetch here): the venv with torchlint[lsp].
  if (process.env.TORCHLINT_PYTHON) {
    fs.mkdirSync(path.join(workspace, ".vscode"));
    fs.writeFileSync(path.join(workspace, ".vscode", "settings.json"), JSON.stringify({ "torchlint.interpreter": [process.env.TORCHLINT_PYTHON] }));
  }
  fs.writeFileSync(
    path.join(userData, "User", "settings.json"),
    JSON.stringify({
      "workbench.startupEditor": "none",
      "security.workspace.trust.enabled": false,
      "telemetry.telemetryLevel": "off",
      "extensions.ignoreRecommendations": true,
      "workbench.tips.enabled": false,
      "workbench.enableExperiments": false,
      "update.mode": "none",
      "editor.minimap.enabled": false,
      "notebook.output.textLineLimit": 5,
      "window.commandCenter": false,
      "chat.disableAIFeatures": true,
      "files.autoSave": "off",
    }),
  );

  const common = ["--user-data-dir", userData, "--extensions-dir", extensions];
  // NODE_BIN: the Node that code-server needs (24), first; TORCHLINT_BIN_DIR: where the extension
  // finds `python3` (with torchlint[lsp]), the way a user's PATH or activated venv would give it.
  const dirs = [process.env.NODE_BIN, process.env.TORCHLINT_BIN_DIR].filter(Boolean);
  const env = { ...process.env, PATH: [...dirs, process.env.PATH].join(path.delimiter) };
  log(`installing ${path.relative(repo, vsix)} into code-server`);
  const install = spawnSync(codeServer, [...common, "--install-extension", vsix], { encoding: "utf8", timeout: 120_000, env });
  if (install.status !== 0 || !/torchlint/.test(install.stdout + install.stderr)) {
    throw new Error(`code-server --install-extension failed (${install.status}): ${install.stdout}${install.stderr}`);
  }
  log(install.stdout.trim().split("\n").pop());

  const port = await freePort();
  const server = spawn(
    codeServer,
    [...common, "--auth", "none", "--bind-addr", `127.0.0.1:${port}`, "--disable-telemetry", "--disable-update-check",
      "--disable-workspace-trust", "--disable-getting-started-override", workspace],
    { env, stdio: ["ignore", "pipe", "pipe"], detached: true },
  );
  const serverLog = fs.createWriteStream(path.join(shots, "code-server.log"));
  server.stdout.pipe(serverLog);
  server.stderr.pipe(serverLog);
  let browser;
  let passed = false;
  try {
    await waitHttp(`http://127.0.0.1:${port}/healthz`, 60_000);
    log(`code-server on port ${port}`);
    browser = await chromium.launch({ executablePath: browserPath, args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] });
    const page = await browser.newPage({ viewport: { width: 1500, height: 950 } });
    page.setDefaultTimeout(TIMEOUT);
    await page.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(workspace)}`);
    await page.locator(".monaco-workbench").waitFor();
    await page.waitForTimeout(3000);

    // -- the training file -------------------------------------------------------------
    await quickOpen(page, "train.py");
    await page.locator(".monaco-editor .view-lines").first().waitFor();
    // squiggles: warnings under the flagged calls (diagnostics come from the server)
    await page.locator(".monaco-editor .squiggly-warning").first().waitFor({ timeout: TIMEOUT });
    await runCommand(page, "View: Focus Problems (Errors, Warnings, Infos)");
    const problems = page.locator(".markers-panel");
    await problems.getByText("TL201", { exact: false }).first().waitFor();
    await problems.getByText("TL103", { exact: false }).first().waitFor();
    const count = await page.locator(".markers-panel .monaco-list-row").count();
    log(`Problems panel shows torchlint findings for train.py (${count} rows in view)`);
    await page.screenshot({ path: path.join(shots, "vscode-1-train-py-problems.png") });

    // hover over the first finding: the message, the rule link
    await goTo(page, 21, 40);
    await page.keyboard.press("Control+K");
    await page.keyboard.press("Control+I");
    const hover = page.locator(".monaco-hover:visible");
    await hover.getByText("syncs with the GPU every step", { exact: false }).first().waitFor();
    // the server's hover: the rule's hint (the reason) and a link to its page
    await hover.getByText("A sync waits for all queued GPU work", { exact: false }).first().waitFor();
    await hover.getByText("TL201 documentation", { exact: false }).first().waitFor();
    await page.screenshot({ path: path.join(shots, "vscode-2-train-py-hover.png") });
    await page.keyboard.press("Escape");

    // quick fix on the DataLoader of fit(): TL103 persistent_workers=True
    await goTo(page, 45, 20);
    await quickFix(page, "persistent_workers=True", path.join(shots, "vscode-3-train-py-quickfix-menu.png"));
    await page.keyboard.press("Control+S");
    await waitFor(() => fs.readFileSync(path.join(workspace, "train.py"), "utf8").includes("persistent_workers=True"), "train.py to have persistent_workers=True on disk");
    log("quick fix applied and saved: train.py has persistent_workers=True");
    await waitFor(async () => (await problems.getByText("TL103", { exact: false }).count()) === 0, "TL103 to leave the Problems panel");
    await page.screenshot({ path: path.join(shots, "vscode-4-train-py-fixed.png") });

    // "ignore this line" on a TL201 finding (line 24: `ids = targets.tolist()`): `# noqa: TL201`
    await page.locator(".monaco-editor .view-lines").first().click();
    await goTo(page, 24, 20);
    await quickFix(page, "Ignore TL201 on this line", path.join(shots, "vscode-4b-train-py-ignore-menu.png"));
    await page.keyboard.press("Control+S");
    await waitFor(() => /noqa: TL201/.test(fs.readFileSync(path.join(workspace, "train.py"), "utf8").split("\n")[23]),
      "train.py line 24 to end in # noqa: TL201 on disk");
    log("ignore-this-line applied and saved: train.py line 24 has # noqa: TL201");

    // -- the notebook ----------------------------------------------------------------------
    await quickOpen(page, "train.ipynb");
    await page.locator(".notebook-editor").first().waitFor();
    await runCommand(page, "View: Focus Problems (Errors, Warnings, Infos)");
    const pin = problems.getByText("pin_memory", { exact: false }).first();
    await pin.waitFor();
    await problems.getByText("TL401", { exact: false }).first().waitFor();
    await page.screenshot({ path: path.join(shots, "vscode-5-notebook-problems.png") });
    // open the TL102 finding from the Problems panel (puts the cursor in its cell), quick fix it
    await pin.dblclick();
    await page.waitForTimeout(1000);
    await quickFix(page, "pin_memory=True", path.join(shots, "vscode-6-notebook-quickfix-menu.png"));
    await page.keyboard.press("Control+S");
    await waitFor(() => {
      const nb = JSON.parse(fs.readFileSync(path.join(workspace, "train.ipynb"), "utf8"));
      return nb.cells.some((c) => [].concat(c.source).join("").includes("pin_memory=True"));
    }, "train.ipynb to have pin_memory=True on disk");
    log("notebook quick fix applied and saved: train.ipynb has pin_memory=True");
    await waitFor(async () => (await problems.getByText("TL102", { exact: false }).count()) === 0, "TL102 to leave the Problems panel");
    await problems.getByText("TL101", { exact: false }).first().waitFor();  // the cell's other finding stays
    await page.screenshot({ path: path.join(shots, "vscode-7-notebook-fixed.png") });

    // "torchlint: Fix all auto-fixable problems" from a cell: the notebook's safe fixes
    // (notebook.source.fixAll.torchlint): TL202 (device=) in cell 9 and TL004 (the unused noqa)
    await runCommand(page, "torchlint: Fix all auto-fixable problems");
    await page.waitForTimeout(1000);
    await page.keyboard.press("Control+S");
    await waitFor(() => {
      const nb = JSON.parse(fs.readFileSync(path.join(workspace, "train.ipynb"), "utf8"));
      const text = nb.cells.map((c) => [].concat(c.source).join("")).join("\n");
      return text.includes('torch.zeros(16, 3, 32, 32, device="cuda")') && !text.includes("noqa: TL501");
    }, "train.ipynb to have the fix-all edits on disk");
    await waitFor(async () => (await problems.getByText("TL202", { exact: false }).count()) === 0, "TL202 to leave the Problems panel");
    log("fix all applied and saved: train.ipynb has device=\"cuda\" and no unused noqa");
    await page.screenshot({ path: path.join(shots, "vscode-8-notebook-fix-all.png") });

    // torchlint.notebooks.enable = false (written to the workspace settings on disk): the server
    // restarts, the notebook is not sent to it, so its findings go; train.py's come back
    const settingsFile = path.join(workspace, ".vscode", "settings.json");
    const workspaceSettings = fs.existsSync(settingsFile) ? JSON.parse(fs.readFileSync(settingsFile, "utf8")) : {};
    fs.mkdirSync(path.dirname(settingsFile), { recursive: true });
    fs.writeFileSync(settingsFile, JSON.stringify({ ...workspaceSettings, "torchlint.notebooks.enable": false }));
    await waitFor(async () => (await problems.getByText("TL401", { exact: false }).count()) === 0, "the notebook's findings to go", 60_000);
    await problems.getByText("TL201", { exact: false }).first().waitFor();  // train.py's, from the restarted server
    await page.waitForTimeout(8000);  // and the notebook's stay away (not a gap during the restart)
    if ((await problems.getByText("TL401", { exact: false }).count()) !== 0) throw new Error("notebook findings with torchlint.notebooks.enable = false");
    log("torchlint.notebooks.enable = false: server restarted, the notebook's findings gone, train.py's back");
    await page.screenshot({ path: path.join(shots, "vscode-9-notebooks-disabled.png") });
    log(`screenshots in ${shots}`);
    passed = true;
  } catch (err) {
    if (browser) {
      const pages = browser.contexts().flatMap((c) => c.pages());
      if (pages[0]) await pages[0].screenshot({ path: path.join(shots, "vscode-FAILED.png") }).catch(() => {});
    }
    throw err;
  } finally {
    if (browser) await browser.close().catch(() => {});
    try { process.kill(-server.pid, "SIGTERM"); } catch {}
    // the temporary workspace and editor profile: kept (with the editor's logs) when it failed
    if (passed) {
      await new Promise((r) => setTimeout(r, 2000));
      try { fs.rmSync(tmp, { recursive: true, force: true, maxRetries: 3 }); } catch {}
    }
  }
}

/** Ctrl+. at the cursor until the quick fix menu lists `title`; a screenshot of it; pick it. */
async function quickFix(page, title, shot) {
  const item = page.locator(".action-widget .monaco-list-row:visible", { hasText: title }).first();
  // (the menu can close under the pointer when the findings are published again, e.g. once the
  // workspace index is built: then ask again)
  for (let attempt = 1; ; attempt++) {
    await page.keyboard.press("Control+.");
    try {
      await item.waitFor({ timeout: 10_000 });
      await page.screenshot({ path: shot });
      // by keyboard (the menu has the focus): down to the item, Enter
      const focused = page.locator(".action-widget .monaco-list-row.focused:visible").first();
      for (let i = 0; i < 10 && !((await focused.textContent({ timeout: 2_000 })) || "").includes(title); i++) {
        await page.keyboard.press("ArrowDown");
      }
      if (!((await focused.textContent({ timeout: 2_000 })) || "").includes(title)) throw new Error(`no "${title}" in the menu`);
      await page.keyboard.press("Enter");
      return;
    } catch (err) {
      if (attempt === 6) throw err;
      log(`quick fix menu without "${title}" (attempt ${attempt}); asking again`);
      await page.keyboard.press("Escape");
      await page.waitForTimeout(1500);
    }
  }
}

async function quickOpen(page, name) {
  await page.keyboard.press("Control+P");
  const input = page.locator(".quick-input-widget input");
  await input.waitFor();
  await input.fill(name);
  await page.locator(".quick-input-list .monaco-list-row").first().waitFor();
  await page.waitForTimeout(500);
  await page.keyboard.press("Enter");
}

async function runCommand(page, title) {
  await page.keyboard.press("F1");
  const input = page.locator(".quick-input-widget input");
  await input.waitFor();
  await input.fill(`>${title}`);
  await page.locator(".quick-input-list .monaco-list-row").first().waitFor();
  await page.waitForTimeout(300);
  await page.keyboard.press("Enter");
}

async function goTo(page, line, column) {
  await page.keyboard.press("Control+G");
  const input = page.locator(".quick-input-widget input");
  await input.waitFor();
  await input.fill(`:${line}:${column}`);
  await page.waitForTimeout(300);
  await page.keyboard.press("Enter");
  await page.waitForTimeout(300);
}

async function waitFor(check, what, ms = 30_000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    try { if (await check()) return; } catch {}
    await new Promise((r) => setTimeout(r, 300));
  }
  throw new Error(`timed out waiting for ${what}`);
}

const started = Date.now();
main().then(
  () => { log(`PASS in ${((Date.now() - started) / 1000).toFixed(1)} s`); process.exit(0); },
  (err) => { console.error(`[vscode] FAIL: ${err.stack || err}`); process.exit(1); },
);
